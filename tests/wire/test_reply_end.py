"""The reply scanner (emqd/wire/resp.py `reply_end`): where a reply of any RESP2 or RESP3
type ends in a buffer, or that it is not all there yet. The cluster's router relays the
owner front's replies by it, as the bytes they came in."""

from __future__ import annotations

import hiredis
import pytest
from hypothesis import given
from hypothesis import strategies as st

from emqd.wire.resp import encode, reply_end

REPLIES = [b"+OK\r\n", b"-ERR no\r\n", b":12\r\n", b"$3\r\nabc\r\n", b"$-1\r\n", b"*-1\r\n",
           b"*2\r\n$1\r\na\r\n:1\r\n", b"%1\r\n+k\r\n*1\r\n_\r\n", b"~2\r\n,1.5\r\n#t\r\n",
           b"=7\r\ntxt:abc\r\n", b"|1\r\n+a\r\n:1\r\n$2\r\nhi\r\n", b"$4\r\na\r\nb\r\n",
           b"*3\r\n*0\r\n$0\r\n\r\n(123\r\n"]


@pytest.mark.parametrize("reply", REPLIES)
def test_the_scanner_finds_each_reply_s_end_and_waits_for_a_cut_one(reply: bytes) -> None:
    two = reply + b":7\r\n"
    assert reply_end(two, 0) == len(reply)
    assert reply_end(two, len(reply)) == len(two)
    for cut in range(len(reply)):
        assert reply_end(reply[:cut], 0) is None, cut


@given(st.recursive(
    st.one_of(st.binary(max_size=20), st.integers(-10**12, 10**12), st.none()),
    lambda inner: st.lists(inner, max_size=4), max_leaves=12))
def test_the_scanner_agrees_with_hiredis_on_any_nesting(value: object) -> None:
    data = encode(value, 2)
    reader = hiredis.Reader()
    reader.feed(data)
    assert reader.gets() is not False
    assert reply_end(data, 0) == len(data)
