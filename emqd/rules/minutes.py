"""A queue's metrics history as it is stored: one record a minute, packed into hour blocks.

Per queue and minute (protocol section 22.5): the jobs completed, the failures
(every EMQ.FAIL), the jobs that died, and the wait and run times' 50th, 95th
and 99th percentiles. The records live in the queue's hash `p.."minutes"`, two
fields, both written by housekeeping's close of a minute (verbs/minute_close.py)
as plain HSETs, so the log, a rewrite and Redis itself keep them like any key:

    cur   the block of the latest hour that has a record (rewritten each minute)
    old   the blocks of the hours before it, oldest first, within the window
          (rewritten once an hour, when `cur` moves on)

    block  = varint hour (minutes since the epoch // 60), varint length, records
    record = byte: minute of the hour (bits 0-5), has wait times (bit 6), has run
             times (bit 7); varint completed, varint failures, varint dead;
             3 codes of the wait times, when present; 3 of the run times, when present
    varint = 7 bits a byte, low first, the top bit set on every byte but the last

A time is kept as a code of one byte (`code`): exact below 16 ms, then eight
steps an octave (each 12.5% wide), up to 2^34 ms (199 days; longer is the last
code); `value` gives a code's midpoint, within 6.25% of any time it stands for.

Why two fields and not a field a minute or an hour: a field's name in emqd's
compact rows is part of the row's shared schema (store/hash.py), so names that
change every hour would make a schema an hour per queue; and a field costs
~110 bytes of its own, which for 4,380 minutes (or 73 hours) would be over the
bound by itself. Bounded (`CAP`): `old` keeps the hours from WINDOW_HOURS
before `cur`'s, and drops its oldest blocks while `old` and `cur` together are
over CAP bytes: at most 62 KiB of records and about 0.5 KiB of the hash and key
around them, under 64 KiB a queue (MEMORY USAGE of the key). A minute's record
is 4 to 14 bytes for any queue under 35,000 completions and 16,000 failures and
deaths a minute, so 72 hours (and the current one) fit; only a queue busier than
that, every minute for three days, keeps fewer hours.
"""

from __future__ import annotations

from typing import Final

MINUTE_MS: Final = 60_000
HOUR_MINUTES: Final = 60
WINDOW_HOURS: Final = 72  # the hours kept before the current one
CAP: Final = 62 * 1024  # bytes of records a queue keeps, `old` and `cur` together
CURRENT: Final[bytes] = b"cur"
OLD: Final[bytes] = b"old"
EXACT: Final = 16  # times below this many ms have codes of their own
LAST_CODE: Final = 255
WAIT_BIT: Final = 0x40
RUN_BIT: Final = 0x80
MINUTE_BITS: Final = 0x3F


def code(ms: int) -> int:
    """A time's code: exact below EXACT, then eight codes an octave, at most LAST_CODE."""
    if ms < EXACT:
        return max(ms, 0)
    bits = ms.bit_length()
    shift = bits - 4
    found = EXACT + (bits - 5) * 8 + ((ms >> shift) - 8)
    return found if found < LAST_CODE else LAST_CODE


def value(found: int) -> int:
    """The time a code stands for: its range's midpoint (the time itself below EXACT)."""
    if found < EXACT:
        return found
    octave, step = divmod(found - EXACT, 8)
    shift = octave + 1
    return ((8 + step) << shift) + (1 << shift) // 2


def percentiles(histogram: dict[int, int]) -> tuple[int, int, int] | None:
    """The codes of the 50th, 95th and 99th percentiles of a histogram (code -> count):
    the first code whose running count reaches each rank (nearest rank). None: empty."""
    total = sum(histogram.values())
    if total <= 0:
        return None
    ranks = [(total * share + 99) // 100 for share in (50, 95, 99)]
    found: list[int] = []
    seen = 0
    for key in sorted(histogram):
        seen += histogram[key]
        while len(found) < 3 and seen >= ranks[len(found)]:
            found.append(key)
    return found[0], found[1], found[2]


class Minute:
    """One minute's figures, as a record holds them (times as codes)."""

    __slots__ = ("minute", "completed", "failures", "dead", "wait", "run")

    def __init__(self, minute: int, completed: int, failures: int, dead: int,
                 wait: tuple[int, int, int] | None, run: tuple[int, int, int] | None) -> None:
        self.minute = minute  # minutes since the epoch
        self.completed = completed
        self.failures = failures
        self.dead = dead
        self.wait = wait
        self.run = run

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Minute) and self.fields() == other.fields()

    def __repr__(self) -> str:
        return f"Minute{self.fields()!r}"

    def fields(self) -> tuple[object, ...]:
        return (self.minute, self.completed, self.failures, self.dead, self.wait, self.run)

    def merged(self, later: Minute) -> Minute:
        """Two records of one minute (it was closed, then more of it was seen: a restart
        within the minute): the counts added, each time the larger, as a bound."""
        return Minute(self.minute, self.completed + later.completed,
                      self.failures + later.failures, self.dead + later.dead,
                      _larger(self.wait, later.wait), _larger(self.run, later.run))


def _larger(a: tuple[int, int, int] | None,
            b: tuple[int, int, int] | None) -> tuple[int, int, int] | None:
    if a is None or b is None:
        return a if b is None else b
    return max(a[0], b[0]), max(a[1], b[1]), max(a[2], b[2])


# --- bytes ----------------------------------------------------------------------------
def _varint(n: int) -> bytes:
    out = bytearray()
    n = max(n, 0)
    while n >= 0x80:
        out.append((n & 0x7F) | 0x80)
        n >>= 7
    out.append(n)
    return bytes(out)


def _read_varint(data: bytes, at: int) -> tuple[int, int]:
    """(the number, the offset after it); ValueError when the bytes end first."""
    n = 0
    shift = 0
    while True:
        if at >= len(data):
            raise ValueError("a varint runs past the end")
        byte = data[at]
        at += 1
        n |= (byte & 0x7F) << shift
        if byte < 0x80:
            return n, at
        shift += 7


def record(minute: Minute) -> bytes:
    """One minute as a record (its hour is its block's)."""
    head = minute.minute % HOUR_MINUTES
    if minute.wait is not None:
        head |= WAIT_BIT
    if minute.run is not None:
        head |= RUN_BIT
    out = bytes((head,)) + _varint(minute.completed) + _varint(minute.failures) + \
        _varint(minute.dead)
    for times in (minute.wait, minute.run):
        if times is not None:
            out += bytes(times)
    return out


def block(hour: int, records: bytes) -> bytes:
    return _varint(hour) + _varint(len(records)) + records


def blocks(data: bytes | None) -> list[tuple[int, bytes]]:
    """A field's blocks, (hour, records) each; ValueError for bytes not in this form."""
    found: list[tuple[int, bytes]] = []
    at = 0
    while data is not None and at < len(data):
        hour, at = _read_varint(data, at)
        size, at = _read_varint(data, at)
        if at + size > len(data):
            raise ValueError("a block runs past the end")
        found.append((hour, data[at:at + size]))
        at += size
    return found


def minutes_of(hour: int, records: bytes) -> list[Minute]:
    """A block's minutes, in order; ValueError for bytes not in this form."""
    found: list[Minute] = []
    at = 0
    while at < len(records):
        head = records[at]
        at += 1
        completed, at = _read_varint(records, at)
        failures, at = _read_varint(records, at)
        dead, at = _read_varint(records, at)
        times: list[tuple[int, int, int] | None] = []
        for bit in (WAIT_BIT, RUN_BIT):
            if head & bit:
                if at + 3 > len(records):
                    raise ValueError("a record runs past the end")
                times.append((records[at], records[at + 1], records[at + 2]))
                at += 3
            else:
                times.append(None)
        minute = hour * HOUR_MINUTES + (head & MINUTE_BITS)
        found.append(Minute(minute, completed, failures, dead, times[0], times[1]))
    return found


def kept(old: bytes | None, current: bytes) -> bytes:
    """`old` (with the block that `current` moves on from appended) without its blocks
    older than WINDOW_HOURS before `current`'s hour, nor its oldest beyond CAP bytes."""
    now_hour = blocks(current)[0][0]
    found = [(hour, records) for hour, records in blocks(old)
             if hour >= now_hour - WINDOW_HOURS]
    encoded = [block(hour, records) for hour, records in found]
    room = CAP - len(current)
    size = sum(map(len, encoded))
    first = 0
    while size > room and first < len(encoded):
        size -= len(encoded[first])
        first += 1
    return b"".join(encoded[first:])
