"""Loading the file: replay, torn tails dropped, damage named by its offset, file untouched."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from emqd.persist import load as load_module
from emqd.persist.load import LoadError, load
from emqd.store.keyspace import Keyspace
from tests.persist.helpers import RandomPlans, dump, encode_records, write_file


@pytest.fixture(params=[16 * 1024, 7], ids=["big-slices", "tiny-slices"])
def slices(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> int:
    """Run each test with the real slice size and with slices of a few bytes."""
    monkeypatch.setattr(load_module, "SLICE_BYTES", request.param)
    return request.param


def applied(plans: list) -> Keyspace:
    space = Keyspace()
    for ops in plans:
        space.apply(ops)
    return space


@pytest.mark.parametrize("seed", range(6))
def test_replay_gives_the_keyspace_the_plans_built(tmp_path: Path, slices: int, seed: int) -> None:
    plans = RandomPlans(seed).plans(400)
    path = str(tmp_path / "emqd.aof")
    data = write_file(path, plans)
    space = Keyspace()
    assert load(path, space) == load_module.Loaded(len(data), 0)
    assert dump(space) == dump(applied(plans))


def test_a_missing_or_empty_file_loads_nothing(tmp_path: Path) -> None:
    space = Keyspace()
    assert load(str(tmp_path / "none.aof"), space) == load_module.Loaded(0, 0)
    (tmp_path / "empty.aof").write_bytes(b"")
    assert load(str(tmp_path / "empty.aof"), space) == load_module.Loaded(0, 0)
    assert len(space) == 0


@pytest.mark.parametrize("last_plan_ops", [1, 3])
def test_every_cut_inside_the_last_record_is_a_torn_tail(
    tmp_path: Path, slices: int, last_plan_ops: int
) -> None:
    plans = RandomPlans(7).plans(30)
    last = [(b"HSET", b"last", b"f", b"v\r\n")]
    last += [(b"ZADD", b"zl", 1.5, b"m")] * (last_plan_ops - 1)
    whole = encode_records(plans)
    record = encode_records([last])
    expected = dump(applied(plans))
    path = tmp_path / "emqd.aof"
    for cut in range(1, len(record)):
        path.write_bytes(whole + record[:cut])
        space = Keyspace()
        loaded = load(str(path), space)
        assert (loaded.size, loaded.torn_bytes) == (len(whole), cut), cut
        assert dump(space) == expected, cut
        assert path.read_bytes() == whole + record[:cut]  # load itself never writes


def test_complete_commands_of_a_multi_without_exec_are_dropped(tmp_path: Path, slices: int) -> None:
    plans = RandomPlans(8).plans(20)
    whole = encode_records(plans)
    record = encode_records(
        [[(b"HSET", b"a", b"f", b"1"), (b"DEL", b"h:1"), (b"HSET", b"b", b"f", b"2")]]
    )
    unterminated = record[: record.rindex(b"*1\r\n$4\r\nEXEC")]
    path = tmp_path / "emqd.aof"
    path.write_bytes(whole + unterminated)
    space = Keyspace()
    loaded = load(str(path), space)
    assert (loaded.size, loaded.torn_bytes) == (len(whole), len(unterminated))
    assert dump(space) == dump(applied(plans))


def damaged(
    tmp_path: Path, plans_before: int, bad: bytes, after: int = 20
) -> tuple[str, int, bytes]:
    rng = RandomPlans(9)
    head = encode_records(rng.plans(plans_before))
    tail = encode_records(rng.plans(after))
    data = head + bad + tail
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    return str(path), len(head), data


@pytest.mark.parametrize(
    "bad, at",
    [
        (b"#garbage\r\n", 0),  # not a command at all
        (b"*2\r\n$3\r\nDEL\r\n$x\r\nk\r\n", 14),  # a bad bulk length
        (b"*2\r\n$3\r\nDEL\r\n$1\r\nkk\r\n", 18),  # a bulk string longer than it says
        (b"*2\r\n$4\r\nINCR\r\n$1\r\nk\r\n", 0),  # not an op the file may hold
        (b"*2\r\n$4\r\nHSET\r\n$1\r\nk\r\n", 0),  # HSET without a field
        (b"*1\r\n$4\r\nEXEC\r\n", 0),  # EXEC without MULTI
        (b"*1\r\n$5\r\nMULTI\r\n*1\r\n$5\r\nMULTI\r\n", 15),  # MULTI inside MULTI
    ],
)
def test_damage_before_the_end_stops_the_load_naming_its_offset(
    tmp_path: Path, slices: int, bad: bytes, at: int
) -> None:
    path, offset, data = damaged(tmp_path, 50, bad)
    with pytest.raises(LoadError) as caught:
        load(path, Keyspace())
    assert caught.value.offset == offset + at
    assert f"byte offset {offset + at}" in str(caught.value)
    assert Path(path).read_bytes() == data


def test_damage_in_the_last_record_is_damage_not_a_torn_tail(tmp_path: Path, slices: int) -> None:
    path, offset, data = damaged(tmp_path, 30, b"*2\r\n$3\r\nDEL\r\n$1\r\nk\r\r", after=0)
    with pytest.raises(LoadError) as caught:
        load(path, Keyspace())
    assert caught.value.offset == offset + 18  # where its CRLF should be


def test_an_op_the_keyspace_refuses_is_damage_at_its_record(tmp_path: Path, slices: int) -> None:
    before = [[(b"ZADD", b"z", 1, b"m")], [(b"HSET", b"h", b"f", b"v")]]
    refused = [(b"HSET", b"x", b"f", b"v"), (b"HSET", b"z", b"f", b"v")]  # z is a sorted set
    head = encode_records(before)
    path = tmp_path / "emqd.aof"
    data = head + encode_records([refused, [(b"DEL", b"h")]])
    path.write_bytes(data)
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert caught.value.offset == len(head)  # the MULTI of the refused plan
    assert path.read_bytes() == data


def test_a_big_file_with_a_torn_tail_loads_through_many_anchors(tmp_path: Path) -> None:
    plans = [
        [(b"HSET", b"job:%d" % i, b"payload", os.urandom(50)), (b"ZADD", b"pending", i, b"%d" % i)]
        for i in range(20_000)
    ]
    whole = encode_records(plans)
    torn = encode_records([[(b"HSET", b"job:x", b"payload", b"p")]])[:-3]
    path = tmp_path / "emqd.aof"
    path.write_bytes(whole + torn)
    space = Keyspace()
    loaded = load(str(path), space)
    assert (loaded.size, loaded.torn_bytes) == (len(whole), len(torn))
    assert len(space.zset(b"pending") or ()) == 20_000


def test_the_strict_scan_reads_only_the_tail_of_a_big_clean_file(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Records of one size: slice ends that fall at the same place of every
    # record must still find record boundaries.
    plans = [
        [(b"HSET", b"emq:{q}:job:%07d" % i, b"state", b"pending", b"payload", b"p" * 36,
          b"created_ms", b"%013d" % i),
         (b"ZADD", b"emq:{q}:pending", b"%07d" % i, b"%07d" % i),
         (b"HSET", b"emq:{q}:meta", b"seq", b"%07d" % i)]
        for i in range(20_000)
    ]
    path = tmp_path / "emqd.aof"
    path.write_bytes(encode_records(plans))
    scanned = []
    real = load_module._commands

    def counting(buf, pos, end):  # type: ignore[no-untyped-def]
        for item in real(buf, pos, end):
            scanned.append(item)
            yield item

    monkeypatch.setattr(load_module, "_commands", counting)
    space = Keyspace()
    assert load(str(path), space).torn_bytes == 0
    assert len(space) == 20_002
    assert 0 < len(scanned) < 2_000  # of 100_000 commands


# --- the CRLF after each bulk string, in the middle of a big file -------------------
def _middle_of_a_big_file(last_arg: bytes) -> tuple[bytes, int, bytes]:
    """4,000 plans, one HSET whose value is `last_arg`, 4,000 plans: (head, offset of
    that value's terminator, tail), the damage far from the strictly scanned tail."""
    rng = RandomPlans(21)
    head = encode_records(rng.plans(4000))
    record = encode_records([[(b"HSET", b"damaged", b"f", last_arg)]])
    return head + record[:-2], len(head) + len(record) - 2, encode_records(rng.plans(4000))


@pytest.mark.parametrize(
    "value, terminator",
    [
        (b"v", b"XX"),
        (b"v", b"\r\r"),
        (b"v", b"\n\n"),
        (b"v", b"\n\r"),
        (b"v", b"\rX"),
        (b"v\r\nw", b"XX"),  # a value with its own CRLF
        (b"v\r", b"\nX"),  # the LF of the damage pairs with the value's CR
        (b"v\r", b"\n\r"),
    ],
)
def test_a_damaged_crlf_after_a_bulk_string_mid_file_stops_the_load_at_it(
    tmp_path: Path, slices: int, value: bytes, terminator: bytes
) -> None:
    head, offset, tail = _middle_of_a_big_file(value)
    data = head + terminator + tail
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert caught.value.offset == offset
    assert "bulk string not followed by CRLF" in str(caught.value)
    assert path.read_bytes() == data


def test_a_damaged_crlf_among_values_holding_crlfs_is_found(tmp_path: Path) -> None:
    plans = [[(b"HSET", b"h%d" % i, b"f", b"a\r\nb" if i % 2 else b"ab")] for i in range(3000)]
    data = bytearray(encode_records(plans))
    first = data.index(b"ab\r\n", len(data) // 2) + 2
    data[first : first + 2] = b"XY"
    path = tmp_path / "emqd.aof"
    path.write_bytes(bytes(data))
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert caught.value.offset == first


@pytest.mark.parametrize("value", [b"a\r\nb", b"\r", b"ends in CR\r", b"\rstarts", b"\n\r\n", b""])
def test_values_holding_cr_and_lf_are_not_damage(tmp_path: Path, slices: int, value: bytes) -> None:
    plans = [[(b"HSET", b"h%d" % i, b"f", value * (i % 3)), (b"ZADD", b"z", i, value + b"%d" % i)]
             for i in range(3000)]
    path = str(tmp_path / "emqd.aof")
    data = write_file(path, plans)
    space = Keyspace()
    assert load(path, space) == load_module.Loaded(len(data), 0)
    assert dump(space) == dump(applied(plans))


# --- a length that reaches past the end: a torn tail only when nothing complete follows --
def _inflated(data: bytes, record: int, old: bytes, new: bytes) -> tuple[bytes, int, int]:
    """`data` with the length line `old` of its record number `record` made `new`: (the
    damaged bytes, the offset of the length's digits, the offset of that record)."""
    starts = [i + 2 for i in range(len(data)) if data.startswith(b"\r\n*1\r\n$5\r\nMULTI", i)]
    start = ([0] + starts)[record]
    at = data.index(old, start)
    return data[:at] + new + data[at + len(old):], at + 1, start


def test_a_length_past_the_end_followed_by_complete_records_is_damage(
    tmp_path: Path, slices: int
) -> None:
    plans = [[(b"HSET", b"job:%d" % i, b"payload", b"payload-%d" % i),
              (b"ZADD", b"pending", i, b"%d" % i)] for i in range(10)]
    data, digits, record = _inflated(encode_records(plans), 1, b"$9\r\n", b"$9000\r\n")
    assert len(data) < 9000  # the length reaches past the end of the file
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert (caught.value.offset, caught.value.record) == (digits, record)
    assert f"damaged at byte offset {digits}" in str(caught.value)
    assert f"--check-aof {path}" in str(caught.value)
    assert path.read_bytes() == data


def test_a_length_past_the_end_in_a_long_file_names_that_record(
        tmp_path: Path, slices: int) -> None:
    """hiredis reads on past the damaged length; the strict scan names where it is."""
    plans = [[(b"HSET", b"job:%d" % i, b"payload", b"payload-%d" % i),
              (b"ZADD", b"pending", i, b"%d" % i)] for i in range(1000)]
    data, digits, record = _inflated(encode_records(plans), 500, b"$11\r\n", b"$9000\r\n")
    path = tmp_path / "emqd.aof"
    path.write_bytes(data)
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert caught.value.record == record
    assert f"length at byte offset {digits}" in str(caught.value)
    assert path.read_bytes() == data


def test_a_length_no_record_holds_is_damage_where_it_starts(tmp_path: Path, slices: int) -> None:
    """The issue's case: a huge length appended to a good file of many anchors."""
    plans = [[(b"HSET", b"job:%d" % i, b"payload", os.urandom(40))] for i in range(6000)]
    good = encode_records(plans)
    path = tmp_path / "emqd.aof"
    path.write_bytes(good + b"*3\r\n$9223372036854775808\r\nHSET")
    with pytest.raises(LoadError) as caught:
        load(str(path), Keyspace())
    assert (caught.value.offset, caught.value.record) == (len(good) + 5, len(good))
    assert f"(in the record at byte offset {len(good)})" in str(caught.value)


def test_a_torn_tail_holding_a_value_that_looks_like_resp_is_still_torn(
    tmp_path: Path, slices: int
) -> None:
    """A value cut mid-write may hold CRLF, `*` and `$`: only a complete op after it is damage."""
    whole = encode_records(RandomPlans(3).plans(20))
    record = encode_records([[(b"HSET", b"h", b"f", b"x\r\n*1\r\n$4\r\nEXEC\r\n*2\r\n$3\r\nDEL")]])
    path = tmp_path / "emqd.aof"
    for cut in range(1, len(record)):
        path.write_bytes(whole + record[:cut])
        loaded = load(str(path), Keyspace())
        assert (loaded.size, loaded.torn_bytes) == (len(whole), cut), cut


def test_the_longest_bulk_a_record_holds_is_the_longest_a_request_holds() -> None:
    from emqd.wire import resp

    assert load_module.MAX_BULK == resp.MAX_BULK
