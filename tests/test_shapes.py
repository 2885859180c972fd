"""Every Shape the verbs use: its generated ops, record and applier say what generic code says.

A Shape writes its plan three ways from one declaration (emqd/commit/plan.py): the
ops, the log record formatted in one step, and the store's writes as direct
calls. Each must agree with the generic path (records.append_command for the
record, Keyspace.apply for the writes) on any values, over a store that holds
the keys already or not, watched or not.
"""

from __future__ import annotations

import random

import pytest

from emqd.commit.plan import Shape, Slot
from emqd.persist.records import append_command
from emqd.store.keyspace import Keyspace
from emqd.verbs import add, claim, complete
from tests.support import plain_value

SHAPES = [add.PLAIN, claim.ONE, *complete.SHAPES.values()]


def _slots(shape: Shape) -> list[str]:
    names: list[str] = []
    for op in shape.template:
        for arg in op:
            if isinstance(arg, Slot) and arg.name not in names:
                names.append(arg.name)
    return names


def _values(shape: Shape, rng: random.Random) -> list[bytes]:
    """A value per slot: a few keys shared between ops (as in a real plan), digits elsewhere."""
    out = []
    for name in _slots(shape):
        if name in ("pending", "active", "completed", "metric", "meta", "row", "victim_row"):
            out.append(b"k:" + name.encode())
        else:
            out.append(b"%d" % rng.randrange(10**6))
    return out


@pytest.mark.parametrize("shape", SHAPES, ids=lambda shape: shape.name)
@pytest.mark.parametrize("seed", range(20))
def test_a_shape_agrees_with_the_generic_path(shape: Shape, seed: int) -> None:
    rng = random.Random(seed)
    ops = shape.ops(*_values(shape, rng))
    generic: list[bytes] = []
    for op in ops:
        append_command(op, generic)
    assert shape.body(ops) == b"".join(generic)
    by_op, by_shape = Keyspace(), Keyspace()
    preload = [(b"HSET", b"k:row", b"payload", b"x"), (b"ZADD", b"k:pending", 1, ops[0][2]),
               (b"ZADD", b"k:completed", 0, b"old"), (b"HSET", b"k:meta", b"seq", b"1")]
    for space in (by_op, by_shape):
        if seed % 2:
            space.apply(preload)
        if seed % 3 == 0:
            space.watched = {op[1]: 1 for op in ops[::2]}
    by_op.apply(ops)
    shape.applier.apply(by_shape, ops)
    assert {k: plain_value(v) for k, v in by_shape.data.items()} == {
        k: plain_value(v) for k, v in by_op.data.items()}
    assert by_shape.take_ready() == by_op.take_ready()
