"""Where a queue nobody owns goes, and what a front hands over when the fronts change
(emqd/cluster/fronts.py `place`, `surplus`): rendezvous hashing with bounded loads, as
pure decisions over the loads a front knows."""

from __future__ import annotations

from collections import Counter

from emqd.cluster.fronts import Fronts, score
from emqd.cluster.nodes import Topology

A, B, C, D = b"10.0.0.1:6390", b"10.0.0.2:6390", b"10.0.0.3:6390", b"10.0.0.4:6390"


def fronts_of(address: bytes, live: set[bytes], loads: dict[bytes, int]) -> Fronts:
    fronts = Fronts(Topology([], 1.0), address, b"run", b"", 5000)
    fronts.live = frozenset(live)
    fronts.loads = dict(loads)
    return fronts


def test_thirty_new_queues_placed_by_one_front_are_ten_on_each_of_three() -> None:
    fronts = fronts_of(A, {A, B, C}, {})
    placed: Counter[bytes] = Counter()
    for i in range(30):
        front = fronts.place(b"q%d" % i)
        placed[front] += 1
        fronts.placed_at(front)  # what the front does when it sends a queue there
    assert sorted(placed.values()) == [10, 10, 10]


def test_without_loads_a_queue_goes_to_its_first_front_in_hash_order() -> None:
    fronts = fronts_of(A, {A, B, C}, {A: 0, B: 0, C: 0})
    for i in range(20):
        queue = b"q%d" % i
        assert fronts.place(queue) == max((A, B, C), key=lambda front: score(front, queue))


def test_a_front_at_its_share_is_passed_over_for_the_next_in_hash_order() -> None:
    queue = b"q1"
    order = sorted((A, B, C), key=lambda front: score(front, queue), reverse=True)
    fronts = fronts_of(A, {A, B, C}, {order[0]: 5, order[1]: 1, order[2]: 0})
    assert fronts.place(queue) == order[1]  # share: ceil(7 / 3) = 3; the first is at 5
    fronts.placed_at(order[1])
    fronts.placed_at(order[1])
    assert fronts.place(queue) == order[2]  # the second is at 3 now, counting what it was sent


def test_when_a_fourth_front_joins_each_of_three_hands_over_what_is_beyond_its_share() -> None:
    owned = [b"q%d" % i for i in range(10)]
    fronts = fronts_of(A, {A, B, C, D}, {B: 10, C: 10, D: 0})
    handed = fronts.surplus(owned)
    assert len(handed) == 2  # share: ceil(30 / 4) = 8
    assert handed == sorted(owned, key=lambda queue: score(A, queue))[:2]  # ranked lowest
    assert fronts_of(A, {A, B, C}, {B: 10, C: 10}).surplus(owned) == []  # at its share
