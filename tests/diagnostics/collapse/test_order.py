"""The order of operations (order.py) against a direct computation on small hand-made
distributions: plain Python, one token at a time (sort, accumulate, cut, renormalize)."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ministruct.diagnostics.collapse.order import compare_orders, mask_first, truncation_first


def direct_nucleus(probs: dict[int, float], top_p: float) -> list[int]:
    """The smallest most-probable set with mass >= top_p (ties: lower id first)."""
    order = sorted((i for i in probs if probs[i] > 0), key=lambda i: (-probs[i], i))
    if top_p >= 1:
        return order
    kept, mass = [], 0.0
    for i in order:
        kept.append(i)
        mass += probs[i]
        if mass >= top_p:
            break
    return kept


def direct_softmax(z: dict[int, float], t: float) -> dict[int, float]:
    w = {i: v / t for i, v in z.items()}  # the sampler's order: divide, then subtract the maximum
    m = max(w.values())
    e = {i: math.exp(v - m) for i, v in w.items()}
    s = sum(e.values())
    return {i: v / s for i, v in e.items()}


def direct(z: list[float], legal: set[int], t: float, top_p: float):
    """(mask-first distribution, truncation-first distribution or None), as dicts."""
    zs = dict(enumerate(z))
    if t == 0:
        a = {max(legal, key=lambda i: (zs[i], -i)): 1.0}
        best = max(zs, key=lambda i: (zs[i], -i))
        return a, ({best: 1.0} if best in legal else None)
    pl = direct_softmax({i: zs[i] for i in legal}, t)
    keep = direct_nucleus(pl, top_p)
    a = {i: pl[i] / sum(pl[j] for j in keep) for i in keep}
    pa = direct_softmax(zs, t)
    keep = [i for i in direct_nucleus(pa, top_p) if i in legal]
    if not keep:
        return a, None
    return a, {i: pa[i] / sum(pa[j] for j in keep) for i in keep}


def tv(a: dict, b: dict) -> float:
    return 0.5 * sum(abs(a.get(i, 0.0) - b.get(i, 0.0)) for i in set(a) | set(b))


def test_a_hand_made_case_where_truncation_first_is_empty():
    # token 0 carries 0.9 of the mass and is illegal: at top_p 0.8 the nucleus is {0}
    z = np.log(np.array([0.9, 0.06, 0.04]))
    mask = np.array([False, True, True])
    o = compare_orders(z, mask, 1.0, 0.8)
    assert o.empty and o.tv is None
    a = mask_first(z, mask, 1.0, 0.8)  # legal: 0.6 / 0.4 -> nucleus {1, 2} (0.6 < 0.8)
    assert a.tolist() == pytest.approx([0.0, 0.6, 0.4])


def test_a_hand_made_case_with_a_distance():
    # p = .5 .3 .2, legal {1, 2}; top_p .75: raw nucleus {0, 1} -> legal part {1}: [0, 1, 0]
    # mask first: .6 .4 -> nucleus {1, 2} (.6 < .75): [0, .6, .4]; TV = .4
    z = np.log(np.array([0.5, 0.3, 0.2]))
    mask = np.array([False, True, True])
    b = truncation_first(z, mask, 1.0, 0.75)
    assert b is not None and b.tolist() == pytest.approx([0.0, 1.0, 0.0])
    assert compare_orders(z, mask, 1.0, 0.75).tv == pytest.approx(0.4)


def test_at_top_p_1_and_everything_legal_the_orders_agree():
    z = np.array([1.0, 0.5, -2.0, 3.0])
    assert compare_orders(z, np.ones(4, dtype=bool), 0.7, 0.9).tv == pytest.approx(0.0, abs=1e-12)
    assert compare_orders(z, np.array([True, False, True, True]), 1.3, 1.0).tv == pytest.approx(0.0, abs=1e-12)


@settings(max_examples=300, deadline=None)
@given(
    st.lists(st.floats(-6, 6, allow_nan=False), min_size=2, max_size=7),
    st.data(),
    st.sampled_from([0.0, 0.3, 0.7, 1.0, 1.5]),
    st.sampled_from([0.5, 0.7, 0.9, 0.95, 1.0]),
)
def test_agrees_with_the_direct_computation(z, data, t, top_p):
    n = len(z)
    legal = data.draw(st.sets(st.integers(0, n - 1), min_size=1))
    mask = np.array([i in legal for i in range(n)])
    a, b = direct(z, legal, t, top_p)
    o = compare_orders(np.array(z), mask, t, top_p)
    got_a = mask_first(np.array(z), mask, t, top_p)
    assert got_a.tolist() == pytest.approx([a.get(i, 0.0) for i in range(n)], abs=1e-9)
    assert o.empty == (b is None)
    if b is not None:
        assert o.tv == pytest.approx(tv(a, b), abs=1e-9)
        assert 0.0 <= o.tv <= 1.0
