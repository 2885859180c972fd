"""store/sorted.py against a plain sorted list: every operation, many sublists, both ends."""

from __future__ import annotations

from bisect import bisect_left, bisect_right

from hypothesis import given, settings
from hypothesis import strategies as st

from emqd.store.sorted import SortedKeys

KEYS = st.binary(min_size=0, max_size=3)


def agrees(keys: SortedKeys, model: list[bytes]) -> None:
    assert list(keys) == model and len(keys) == len(model)
    assert list(reversed(keys)) == model[::-1]
    assert all(sub and keys.maxes[i] == sub[-1] for i, sub in enumerate(keys.lists))
    if model:
        assert keys.first() == model[0] and keys.last() == model[-1]


@settings(max_examples=200, deadline=None)
@given(st.lists(st.tuples(st.booleans(), KEYS), max_size=300), st.integers(0, 40),
       st.integers(0, 40), st.booleans())
def test_agrees_with_a_sorted_list(steps: list, start: int, stop: int, reverse: bool) -> None:
    keys, model = SortedKeys(load=4), []  # many small sublists: splits and merges
    for adding, key in steps:
        if adding and key not in model:
            keys.add(key)
            model.insert(bisect_left(model, key), key)
        elif not adding and key in model:
            keys.remove(key)
            model.remove(key)
        agrees(keys, model)
    for key in {k for _, k in steps}:
        assert keys.bisect_left(key) == bisect_left(model, key)
        assert keys.bisect_right(key) == bisect_right(model, key)
        if key in model:
            assert keys.index(key) == model.index(key)
    for rank in range(-len(model), len(model)):
        assert keys[rank] == model[rank]
    expected = model[start:stop]
    assert list(keys.islice(start, stop, reverse)) == (expected[::-1] if reverse else expected)


def test_a_queue_grows_at_one_end_and_shrinks_at_the_other() -> None:
    keys = SortedKeys()
    for i in range(5000):
        keys.add(b"%08d" % i)
    for i in range(4990):
        assert keys.first() == b"%08d" % i
        keys.remove(b"%08d" % i)
    assert list(keys) == [b"%08d" % i for i in range(4990, 5000)]
