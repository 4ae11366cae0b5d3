"""The sampler: validation, the laws of diagnostics.md, and the pure helpers."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from ministruct.cli.errors import error_text, exit_code
from ministruct.decode.sampling import (
    Sampler,
    SamplingParams,
    apply_repeat_penalty,
    masked_logits,
    nucleus,
    softmax,
    top_k_ids,
)
from ministruct.errors import NoLegalContinuation, UsageError

N = 97  # a small odd vocabulary for property tests


# -- validation -------------------------------------------------------------------


@pytest.mark.parametrize(
    "kwargs, flag",
    [
        ({"temperature": -0.1}, "--temperature"),
        ({"top_p": 0}, "--top-p"),
        ({"top_p": 1.5}, "--top-p"),
        ({"top_p": float("nan")}, "--top-p"),
        ({"top_k": -1}, "--top-k"),
        ({"repeat_penalty": 0}, "--repeat-penalty"),
        ({"repeat_penalty": -1.0}, "--repeat-penalty"),
        ({"seed": -3}, "--seed"),
    ],
)
def test_invalid_params(kwargs, flag):
    with pytest.raises(UsageError) as ei:
        SamplingParams(**kwargs)
    param = next(iter(kwargs))
    assert str(ei.value).startswith(param) and ei.value.parameter == param  # the library names the parameter
    assert isinstance(ei.value, ValueError)
    assert error_text(ei.value).startswith(f"ministruct: error: {flag} ")  # the CLI names the flag
    assert exit_code(ei.value) == 2


def test_top_p_message():
    with pytest.raises(UsageError, match=r"top_p must be in \(0, 1\], got 0"):
        SamplingParams(top_p=0)


def test_defaults_and_dict():
    p = SamplingParams()
    assert (p.temperature, p.top_p, p.top_k, p.repeat_penalty, p.seed) == (1.0, 1.0, 0, 1.0, 0)
    assert set(p.to_dict()) == {"temperature", "top_p", "top_k", "repeat_penalty", "seed"}


# -- pure helpers ------------------------------------------------------------------


def test_softmax_handles_inf_and_empty():
    z = np.array([0.0, -np.inf, np.log(3.0)])
    p = softmax(z)
    assert p[1] == 0.0 and np.isclose(p.sum(), 1.0) and np.isclose(p[2] / p[0], 3.0)
    empty = softmax(np.full(4, -np.inf))
    assert not np.isnan(empty).any() and empty.sum() == 0
    big = softmax(np.array([1000.0, 999.0]))
    assert np.isfinite(big).all() and big[0] > big[1]


def test_masked_logits():
    z = np.array([1.0, 2.0, 3.0], dtype=np.float32)
    m = masked_logits(z, np.array([True, False, True]))
    assert m.dtype == np.float64 and m[1] == -np.inf and m[0] == 1.0 and m[2] == 3.0
    assert np.array_equal(masked_logits(z, None), z)
    with pytest.raises(ValueError):
        masked_logits(z, np.array([True, False]))


def test_nucleus_definition():
    p = np.array([0.1, 0.4, 0.0, 0.3, 0.2])
    assert list(nucleus(p, 0.4)) == [1]
    assert list(nucleus(p, 0.5)) == [1, 3]
    assert list(nucleus(p, 0.7)) == [1, 3]
    assert list(nucleus(p, 0.75)) == [1, 3, 4]
    assert sorted(nucleus(p, 1.0)) == [0, 1, 3, 4]  # never the zero-probability id
    ties = np.array([0.25, 0.25, 0.25, 0.25])
    assert list(nucleus(ties, 0.3)) == [0, 1]  # ties: lowest id first


def _nucleus_reference(p: np.ndarray, top_p: float) -> set[int]:
    order = sorted((i for i in range(len(p)) if p[i] > 0), key=lambda i: (-p[i], i))
    if top_p >= 1:
        return set(order)
    total, out = 0.0, []
    for i in order:
        out.append(i)
        total += p[i]
        if total >= top_p:
            break
    return set(out)


@settings(max_examples=150, deadline=None)
@given(
    st.integers(0, 2**32 - 1),
    st.sampled_from([50, 2000, 5000]),
    st.floats(0.05, 1.0),
    st.floats(0.3, 6.0),
)
def test_nucleus_matches_reference(seed, n, top_p, scale):
    """The partial-sort shortcut agrees with a plain full sort."""
    rng = np.random.default_rng(seed)
    p = softmax(rng.normal(size=n) * scale)
    got = nucleus(p, top_p)
    assert len(set(got.tolist())) == len(got)
    assert set(got.tolist()) == _nucleus_reference(p, top_p)


def test_top_k_ids():
    p = np.array([0.1, 0.4, 0.0, 0.3, 0.2])
    assert list(top_k_ids(p, 2)) == [1, 3]
    assert list(top_k_ids(p, 10)) == [1, 3, 4, 0]


def test_repeat_penalty_llama_style():
    z = np.array([2.0, -2.0, 1.0, 0.0])
    out = apply_repeat_penalty(z.copy(), [0, 1, 1, 1, 3], 2.0)
    assert list(out) == [1.0, -4.0, 1.0, 0.0]  # once per distinct id; >0 divided, else multiplied


# -- laws on random logits ---------------------------------------------------------

logit_vectors = st.integers(0, 2**32 - 1).map(
    lambda s: (np.random.default_rng(s).normal(size=N) * 3).astype(np.float32)
)
params_st = st.builds(
    SamplingParams,
    temperature=st.sampled_from([0.0, 0.3, 0.7, 1.0, 1.5]),
    top_p=st.sampled_from([0.5, 0.9, 1.0]),
    top_k=st.sampled_from([0, 1, 5, 40]),
    repeat_penalty=st.sampled_from([1.0, 1.3]),
    seed=st.integers(0, 1000),
)


def _draws(params, logits, mask, n=20, history=(3, 5)):
    s = Sampler(params)
    return [s.sample(logits, mask, list(history)) for _ in range(n)]


@settings(max_examples=80, deadline=None)
@given(logit_vectors, params_st)
def test_identity_law(logits, params):
    """An all-True mask gives exactly the unmasked draws under the same seed."""
    assert _draws(params, logits, np.ones(N, bool)) == _draws(params, logits, None)


@settings(max_examples=60, deadline=None)
@given(logit_vectors, st.integers(0, N - 1), st.sampled_from([0.0, 0.7, 1.5]), params_st)
def test_degenerate_law(logits, only, temperature, params):
    mask = np.zeros(N, bool)
    mask[only] = True
    p = SamplingParams(
        temperature=temperature,
        top_p=params.top_p,
        top_k=params.top_k,
        repeat_penalty=params.repeat_penalty,
        seed=params.seed,
    )
    assert set(_draws(p, logits, mask, n=10, history=[only])) == {only}


@settings(max_examples=60, deadline=None)
@given(logit_vectors, params_st, st.integers(0, 2**32 - 1))
def test_draws_are_legal_and_deterministic(logits, params, mseed):
    mask = np.random.default_rng(mseed).random(N) < 0.2
    mask[mseed % N] = True
    a = _draws(params, logits, mask)
    assert a == _draws(params, logits, mask)
    assert all(mask[t] for t in a)


@settings(max_examples=60, deadline=None)
@given(logit_vectors, st.floats(0.1, 3.0), st.integers(0, 2**32 - 1))
def test_mask_and_temperature_commute(logits, temperature, mseed):
    """Masking the tempered logits = tempering the masked logits (as distributions)."""
    mask = np.random.default_rng(mseed).random(N) < 0.3
    mask[mseed % N] = True
    a = softmax(masked_logits(logits.astype(np.float64) / temperature, mask))
    b = softmax(masked_logits(logits, mask) / temperature)
    np.testing.assert_allclose(a, b, rtol=1e-12, atol=1e-300)
    ids, probs = Sampler(SamplingParams(temperature=temperature)).distribution(logits, mask)
    np.testing.assert_allclose(probs, b[ids], rtol=1e-9)


@settings(max_examples=60, deadline=None)
@given(
    logit_vectors,
    st.sampled_from([0.5, 0.9]),
    st.sampled_from([0, 3]),
    st.integers(0, 2**32 - 1),
)
def test_truncation_acts_on_masked_distribution(logits, top_p, top_k, mseed):
    """top-k/top-p keep legal tokens only, chosen from the renormalised masked distribution."""
    mask = np.random.default_rng(mseed).random(N) < 0.3
    mask[mseed % N] = True
    params = SamplingParams(temperature=1.0, top_p=top_p, top_k=top_k)
    ids, probs = Sampler(params).distribution(logits, mask)
    assert mask[ids].all()
    p = softmax(masked_logits(logits, mask))
    if top_k:
        keep = top_k_ids(p, top_k)
        q = np.zeros_like(p)
        q[keep] = p[keep]
        p = q / q.sum()
    assert set(ids.tolist()) == set(nucleus(p, top_p).tolist())
    np.testing.assert_allclose(probs.sum(), 1.0)


def test_greedy_ties_to_lowest_id():
    z = np.array([0.0, 5.0, 1.0, 5.0], dtype=np.float32)
    s = Sampler(SamplingParams(temperature=0.0))
    assert s.sample(z) == 1
    assert s.sample(z, np.array([True, False, True, True])) == 3
    assert s.sample(z, np.array([True, False, True, False])) == 2


def test_greedy_respects_repeat_penalty():
    z = np.array([3.0, 2.0, -1.0], dtype=np.float32)
    s = Sampler(SamplingParams(temperature=0.0, repeat_penalty=2.0))
    assert s.sample(z, None, [0]) == 1  # 3/2 = 1.5 < 2


def test_empty_legal_set_raises():
    z = np.zeros(5, dtype=np.float32)
    with pytest.raises(NoLegalContinuation):
        Sampler().sample(z, np.zeros(5, bool))


def test_legal_tokens_at_minus_inf_never_nan():
    z = np.array([-np.inf, -np.inf, 1.0], dtype=np.float32)
    s = Sampler(SamplingParams(seed=1))
    draws = {s.sample(z, np.array([True, True, False])) for _ in range(40)}
    assert draws == {0, 1}


def test_seed_changes_draws_and_frequencies_match():
    z = np.log(np.array([0.5, 0.3, 0.2])).astype(np.float32)
    a = _draws(SamplingParams(seed=1), z, None, n=50)
    assert a != _draws(SamplingParams(seed=2), z, None, n=50)
    counts = np.bincount(_draws(SamplingParams(seed=3), z, None, n=4000), minlength=3) / 4000
    np.testing.assert_allclose(counts, [0.5, 0.3, 0.2], atol=0.03)
