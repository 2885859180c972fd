"""concat.joined: what `b"".join` makes, whichever way it takes for the number of pieces."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from emqd.concat import joined


@given(st.lists(st.binary(max_size=300), max_size=40))
def test_joined_is_join(pieces: list[bytes]) -> None:
    result = joined(list(pieces))
    assert result == b"".join(pieces) and type(result) is bytes
