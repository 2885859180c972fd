"""The queue page's charts of its metrics history (protocol section 22.5), as SVG shapes.

Three charts over a window that ends now (the last hour by default; 6, 24 or 72
hours on request): jobs a minute (completed, failures, dead), and the wait and
the run times' p50, p95 and p99 (ms). They are drawn from exactly what
EMQ.METRICS answers (`reading.history`, which runs its planner's reading), in
the page itself: SVG written by the template from the shapes made here, with no
script and nothing fetched from elsewhere, so the page's CSP holds.

Each recorded minute is a point of each series that has a value in it (a count
always; a time only in a minute that had a claim, a completion); points of
consecutive minutes are joined by a line, and a minute without a record
breaks it. In the short windows every point is also a marker that carries its
minute and value (`data-minute`, `data-value`) and says them on hover; the
long ones draw the lines only, since 72 hours are 4,320 minutes.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Final

from emqd.rules.minutes import MINUTE_MS, Minute, value

WINDOWS: Final = {"1h": 60, "6h": 360, "24h": 1440, "72h": 4320}  # name -> minutes
DEFAULT_WINDOW: Final = "1h"
MARKED_MAX: Final = 360  # a window up to this many minutes draws a marker a point
WIDTH: Final = 720
HEIGHT: Final = 120


@dataclass(frozen=True, slots=True)
class Point:
    x: float
    y: float
    minute_ms: int
    value: int


@dataclass(frozen=True, slots=True)
class Series:
    name: str  # what the legend and the class say: completed, p95, ...
    points: list[Point]
    lines: list[str]  # each run of consecutive minutes as an SVG polyline's points


@dataclass(frozen=True, slots=True)
class Chart:
    title: str
    unit: str  # what a value is: "jobs", "ms"
    series: list[Series]
    peak: int  # the top of the y axis
    marked: bool  # each point drawn as a marker
    start_ms: int  # the x axis: from the first minute of the window to now
    width: int = WIDTH
    height: int = HEIGHT

    @property
    def empty(self) -> bool:
        return not any(series.points for series in self.series)


def _series(name: str, found: list[Minute], get: Callable[[Minute], int | None], start_ms: int,
            span_ms: int, peak: int) -> Series:
    points: list[Point] = []
    lines: list[str] = []
    run: list[str] = []
    last: int | None = None
    for minute in found:
        shown = get(minute)
        if shown is None:
            continue
        if last is not None and minute.minute != last + 1 and run:
            lines.append(" ".join(run))
            run = []
        at = minute.minute * MINUTE_MS
        x = round((at - start_ms) / span_ms * WIDTH, 1)
        y = round(HEIGHT - shown / peak * (HEIGHT - 4), 1)
        points.append(Point(x, y, at, shown))
        run.append(f"{x},{y}")
        last = minute.minute
    if run:
        lines.append(" ".join(run))
    return Series(name, points, lines)


def _time(kind: str, rank: int) -> Callable[[Minute], int | None]:
    def get(minute: Minute) -> int | None:
        codes = minute.wait if kind == "wait" else minute.run
        return None if codes is None else value(codes[rank])

    return get


def charts(found: list[Minute], window: str, now_ms: int) -> list[Chart]:
    """The three charts of `found` (EMQ.METRICS' minutes) over `window` (a WINDOWS name)."""
    minutes = WINDOWS[window]
    start_ms = (now_ms // MINUTE_MS - minutes + 1) * MINUTE_MS
    span_ms = minutes * MINUTE_MS
    marked = minutes <= MARKED_MAX
    found = [minute for minute in found if minute.minute * MINUTE_MS >= start_ms]
    counts: list[tuple[str, Callable[[Minute], int | None]]] = [
        ("completed", lambda minute: minute.completed),
        ("failures", lambda minute: minute.failures),
        ("dead", lambda minute: minute.dead)]
    made = []
    for title, unit, getters in (
            ("jobs a minute", "jobs", counts),
            ("wait (ready to claimed)", "ms", [(f"p{r}", _time("wait", i))
                                               for i, r in enumerate((50, 95, 99))]),
            ("run (claimed to completed)", "ms", [(f"p{r}", _time("run", i))
                                                  for i, r in enumerate((50, 95, 99))])):
        values = [shown for _, get in getters for minute in found
                  if (shown := get(minute)) is not None]
        peak = max([1, *values])
        made.append(Chart(title, unit, [_series(name, found, get, start_ms, span_ms, peak)
                                        for name, get in getters], peak, marked, start_ms))
    return made


def window_label(window: str) -> str:
    """`1 hour`, `72 hours`."""
    hours = WINDOWS[window] // 60
    return f"{hours} hour{'' if hours == 1 else 's'}"
