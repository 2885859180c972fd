"""emqd/http/present.py: bytes shown as text, times, payloads, chart geometry."""

from __future__ import annotations

from emqd.http import present


def test_bytes_that_are_not_utf8_or_printable_are_escaped() -> None:
    assert present.shown(b"caf\xc3\xa9") == "café"
    assert present.shown(b"\xff<\x00>\x1b[31m") == "\\xff<\\x00>\\x1b[31m"
    assert present.shown(b"two\nlines\tand tab") == "two\nlines\tand tab"
    assert present.shown(None) == ""


def test_path_parts_encode_every_byte_that_could_split_a_path() -> None:
    assert present.path_part(b"a/b %\xff?#") == "a%2Fb%20%25%FF%3F%23"


def test_times_and_spans() -> None:
    assert present.when(0) == "1970-01-01 00:00:00.000 UTC"
    assert present.when(b"1700000000123") == "2023-11-14 22:13:20.123 UTC"
    assert present.when(b"soon") == "soon"
    assert present.span(250) == "250 ms"
    assert present.span(90_500) == "1 min 30 s"
    assert present.span(3 * 86_400_000) == "3 d 0 h"
    assert present.relative(b"1000", 4000) == "3.0 s ago"
    assert present.relative(9000, 4000) == "in 5.0 s"
    assert present.relative(b"x", 4000) == ""


def test_json_payloads_are_pretty_printed_and_others_shown_as_stored() -> None:
    shown = present.payload(b'{"to":"ann","n":[1,2]}')
    assert shown.is_json and shown.text == '{\n  "to": "ann",\n  "n": [\n    1,\n    2\n  ]\n}'
    assert not present.payload(b"42").is_json  # a bare number is not worth reformatting
    plain = present.payload(b"\xffnot json")
    assert (plain.is_json, plain.text, plain.cut) == (False, "\\xffnot json", 0)
    big = present.payload(b"x" * (present.PAYLOAD_SHOWN + 10))
    assert big.cut == 10 and len(big.text) == present.PAYLOAD_SHOWN


def test_chart_bars_scale_to_the_peak_and_skip_unknown_minutes() -> None:
    chart = present.chart([None, 0, 5, 10], first_minute=60, width=40, height=20)
    assert (chart.peak, chart.total, chart.known) == (10, 15, True)
    assert [(bar.x, bar.height, bar.value, bar.minute) for bar in chart.bars] == [
        (10.0, 0.0, 0, "01:01"), (20.0, 10.0, 5, "01:02"), (30.0, 20.0, 10, "01:03")]
    assert chart.bars[2].y == 0.0
    assert not present.chart([None, None], 0).known


def test_a_small_figure_next_to_a_big_one_stays_visible() -> None:
    chart = present.chart([1, 1000], 0, height=20)
    assert chart.bars[0].height == 1.0
