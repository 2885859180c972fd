// emqd's dashboard: the little JavaScript it needs, and nothing from elsewhere.
//
// 1. An element with data-refresh="/url" is refreshed every data-every ms:
//    the fragment is fetched and swapped in place, so the page updates
//    without a reload (no flicker, the scroll position stays). Paused while
//    the tab is hidden; a failed fetch marks the element stale and retries.
// 2. A button with data-confirm="question" asks before its form is sent.
"use strict";

function refresh(element) {
  const url = element.dataset.refresh;
  const every = Math.max(1000, Number(element.dataset.every) || 3000);
  let busy = false;
  async function tick() {
    if (busy || document.visibilityState !== "visible") return;
    busy = true;
    try {
      const response = await fetch(url, {credentials: "same-origin", cache: "no-store"});
      if (!response.ok) throw new Error(String(response.status));
      element.innerHTML = await response.text();
      element.classList.remove("stale");
      element.dataset.refreshed = String(Date.now());
    } catch (error) {
      element.classList.add("stale");
    } finally {
      busy = false;
    }
  }
  setInterval(tick, every);
}

document.querySelectorAll("[data-refresh]").forEach(refresh);

document.addEventListener("submit", (event) => {
  const button = event.submitter || event.target.querySelector("[data-confirm]");
  const question = button && button.dataset.confirm;
  if (question && !window.confirm(question)) event.preventDefault();
});
