"""The reorder buffer: results finishing in any order come out in input order, each once."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from ministruct.jobs.ordered import InOrder


@given(st.permutations(list(range(12))))
def test_any_finishing_order_comes_out_in_input_order(finishing):
    order: InOrder[int] = InOrder()
    places = [order.add() for _ in range(12)]
    out: list[int] = []
    finished: set[int] = set()
    for i in finishing:
        order.put(places[i], i)
        finished.add(i)
        out += list(order.ready())
        # released as soon as next in line: exactly the finished prefix is out
        first_open = min(set(range(12)) - finished, default=12)
        assert out == list(range(first_open))
        assert order.waiting == 12 - first_open
    assert out == list(range(12))


def test_a_place_is_filled_once_and_only_when_open():
    order: InOrder[str] = InOrder()
    a = order.add()
    order.put(a, "a")
    with pytest.raises(ValueError):
        order.put(a, "again")
    with pytest.raises(ValueError):
        order.put(5, "never added")
    assert list(order.ready()) == ["a"] and list(order.ready()) == []
