"""How stored bytes and times are shown on the pages (Jinja2 filters), and the charts' shapes.

Stored names, ids and payloads are bytes that nobody promised to be UTF-8 or
printable: `shown` decodes them with every byte that is not valid UTF-8, and
every control character but newline and tab, written as `\\xNN`, so a page
always renders and always says exactly what is stored. HTML escaping is
Jinja2's autoescape; nothing here builds markup.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any
from urllib.parse import quote

from emqd.compat.numbers import parse_int

PAYLOAD_SHOWN = 64 << 10  # bytes of a payload a job page shows; the rest is cut, and says so
JSON_MAX = 1 << 20  # payloads up to this size are tried as JSON (pretty-printed)
_CONTROL = re.compile(r"[\x00-\x08\x0b-\x1f\x7f]")


def shown(raw: bytes | str | None) -> str:
    if raw is None:
        return ""
    text = raw.decode("utf-8", "backslashreplace") if isinstance(raw, bytes) else raw
    return _CONTROL.sub(lambda m: f"\\x{ord(m.group()):02x}", text)


def path_part(raw: bytes | str) -> str:
    """One URL path segment: every byte but unreserved ones percent-encoded (`/` too)."""
    return quote(raw, safe="")


def number(value: int | float | None) -> str:
    if value is None:
        return "?"
    return f"{value:,}".replace(",", "\u2009")


def when(ms: int | float | bytes | None) -> str:
    """A time in ms as a UTC date, to the millisecond; the raw value when unreadable."""
    if isinstance(ms, bytes):
        parsed = parse_int(ms)
        if parsed is None:
            return shown(ms)
        ms = parsed
    if ms is None:
        return ""
    try:
        moment = datetime.fromtimestamp(ms / 1000, UTC)
    except (OverflowError, OSError, ValueError):
        return str(ms)
    return moment.strftime("%Y-%m-%d %H:%M:%S.") + f"{moment.microsecond // 1000:03d} UTC"


def span(ms: int | float | None) -> str:
    """A duration in ms, in the largest unit that keeps it readable (`1.5 s`, `3 h 2 min`)."""
    if ms is None:
        return "?"
    ms = abs(ms)
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = ms / 1000
    if seconds < 60:
        return f"{seconds:.1f} s"
    minutes, seconds = divmod(int(seconds), 60)
    if minutes < 60:
        return f"{minutes} min {seconds} s"
    hours, minutes = divmod(minutes, 60)
    if hours < 48:
        return f"{hours} h {minutes} min"
    return f"{hours // 24} d {hours % 24} h"


def relative(ms: int | float | bytes | None, now_ms: int) -> str:
    """`5.0 s ago` or `in 3 min 0 s`; empty when unreadable."""
    if isinstance(ms, bytes):
        ms = parse_int(ms)
    if ms is None:
        return ""
    return f"in {span(ms - now_ms)}" if ms > now_ms else f"{span(now_ms - ms)} ago"


def text_keys(row: dict[Any, Any] | None) -> dict[str, bytes] | None:
    """A row with its field names as text, for templates (which have no bytes literals)."""
    return None if row is None else {shown(field): value for field, value in row.items()}


@dataclass(frozen=True, slots=True)
class Line:
    """One job of a list, as a template reads it."""

    id: bytes
    score: float
    fields: dict[str, bytes] | None  # None: the set lists an id without a row (a ghost)


def lines(listed: list[Any]) -> list[Line]:
    """`reading.Listed` jobs as the templates read them."""
    return [Line(job.id, job.score, text_keys(job.row)) for job in listed]


def progress(raw: bytes | None) -> float | None:
    """A job's progress as a percentage for its bar, when it is a number from 0 to 100 (as
    `job.progress(50)` sends it); None for anything else (it is shown as stored)."""
    if raw is None or len(raw) > 32:
        return None
    try:
        value = float(raw)
    except ValueError:
        return None
    return value if 0 <= value <= 100 else None


def took(fields: dict[str, bytes] | None, now_ms: int) -> str:
    """How long a job ran: from its last claim to its finish, or to now while active; empty
    when it was never claimed."""
    if not fields:
        return ""
    claimed = parse_int(fields.get("claimed_ms") or b"")
    if claimed is None:
        return ""
    finished = parse_int(fields.get("finished_ms") or b"")
    if fields.get("state") == b"active" or finished is None:
        return span(now_ms - claimed)
    return span(finished - claimed) if finished >= claimed else ""


@dataclass(frozen=True, slots=True)
class Payload:
    text: str
    is_json: bool
    cut: int  # bytes not shown


def payload(raw: bytes) -> Payload:
    """The payload as a job page shows it: pretty JSON when it is JSON, else as stored."""
    if len(raw) <= JSON_MAX:
        try:
            parsed = json.loads(raw.decode("utf-8"))
        except (UnicodeDecodeError, ValueError, RecursionError):
            pass
        else:
            if isinstance(parsed, (dict, list)):
                text = json.dumps(parsed, indent=2, ensure_ascii=False)
                if len(text) <= PAYLOAD_SHOWN:
                    return Payload(shown(text), True, 0)
    return Payload(shown(raw[:PAYLOAD_SHOWN]), False, max(0, len(raw) - PAYLOAD_SHOWN))


@dataclass(frozen=True, slots=True)
class Bar:
    x: float
    y: float
    width: float
    height: float
    value: int
    minute: str  # HH:MM UTC, the minute's start


@dataclass(frozen=True, slots=True)
class Chart:
    width: int
    height: int
    bars: list[Bar]
    peak: int  # the largest minute, what the full height stands for
    total: int  # over the window
    known: bool  # at least one minute has a figure


def chart(values: list[int | None], first_minute: int, width: int = 180,
          height: int = 32) -> Chart:
    """Bars for per-minute figures (oldest first; None: no figure), scaled to the peak."""
    peak = max((v for v in values if v is not None), default=0)
    slot = width / max(1, len(values))
    bars = []
    for i, value in enumerate(values):
        if value is None:
            continue
        tall = 0.0 if peak == 0 else max(1.0, height * value / peak) if value else 0.0
        minute = datetime.fromtimestamp((first_minute + i) * 60, UTC).strftime("%H:%M")
        bars.append(Bar(round(i * slot, 2), round(height - tall, 2), round(max(1.0, slot - 1), 2),
                        round(tall, 2), value, minute))
    return Chart(width, height, bars, peak, sum(v for v in values if v is not None),
                 any(v is not None for v in values))
