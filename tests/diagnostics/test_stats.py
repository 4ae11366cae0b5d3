"""Per-step statistics: the laws of diagnostics.md on random logits and masks, an
independent full-sort reference, agreement with the sampler, and the summary."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from ministruct.decode.loop import Step
from ministruct.decode.sampling import Sampler, SamplingParams, log_sum_exp
from ministruct.diagnostics.stats import StepStats, summarize
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import CharClass, Grammar, Repeat

TEMPS = st.sampled_from([0.0, 0.3, 0.7, 1.0, 1.5])
TOP_PS = st.one_of(st.just(1.0), st.floats(0.05, 0.99))


@st.composite
def logits_and_mask(draw, min_size=2, max_size=120):
    n = draw(st.integers(min_size, max_size))
    z = draw(hnp.arrays(np.float32, n, elements=st.floats(-30, 30, width=32)))
    mask = draw(hnp.arrays(np.bool_, n))
    assume(mask.any())
    return z, mask


# -- an independent reference: full softmax, full stable sort --------------------------


def ref_nucleus(z: np.ndarray, ids: np.ndarray, t: float, top_p: float) -> set[int]:
    if top_p >= 1.0:
        return set(ids.tolist())
    if t == 0:
        return {int(ids[int(np.argmax(z))])}
    w = z.astype(np.float64) / t
    p = np.exp(w - w.max())
    p /= p.sum()
    order = np.argsort(-p, kind="stable")
    cum = np.cumsum(p[order])
    k = int(np.argmax(cum >= top_p)) + 1 if cum[-1] >= top_p else len(order)
    return set(ids[order[:k]].tolist())


def ref_stats(z, mask, t, top_p):
    z64 = z.astype(np.float64)
    legal = np.flatnonzero(mask)
    lse = lambda x: float(x.max() + np.log(np.sum(np.exp(x - x.max()))))  # noqa: E731
    kl = lse(z64) - lse(z64[legal])
    raw = ref_nucleus(z64, np.arange(len(z)), t, top_p)
    masked = ref_nucleus(z64[legal], legal, t, top_p)
    return dict(
        legal_count=len(legal),
        kl=kl,
        Z=math.exp(-kl),
        raw=raw,
        masked=masked,
        top_changed=int(np.argmax(z64)) != int(legal[np.argmax(z64[legal])]),
    )


# -- laws -------------------------------------------------------------------------------


@settings(max_examples=300, deadline=None)
@given(logits_and_mask(), TEMPS, TOP_PS)
def test_laws_and_reference(zm, t, top_p):
    z, mask = zm
    rec = StepStats(SamplingParams(temperature=t, top_p=top_p)).compute(z, mask)
    ref = ref_stats(z, mask, t, top_p)
    assert 0 < rec.Z <= 1
    assert rec.kl >= 0
    assert rec.kl == pytest.approx(-math.log(rec.Z), abs=1e-12)
    assert rec.kl == pytest.approx(ref["kl"], abs=1e-9)
    assert rec.Z == pytest.approx(ref["Z"], rel=1e-9)
    assert rec.legal_count == ref["legal_count"]
    assert rec.tag == ("forced" if ref["legal_count"] == 1 else "free")
    assert rec.nucleus_raw == len(ref["raw"])
    assert rec.nucleus_masked == len(ref["masked"])
    assert rec.nucleus_changed == (ref["raw"] != ref["masked"])
    assert rec.top_changed == ref["top_changed"]
    assert 1 <= rec.nucleus_masked <= rec.legal_count
    if rec.tag == "forced":
        assert rec.nucleus_masked == 1
        assert not rec.collapsed
    if top_p == 1.0:
        assert not rec.collapsed
        assert rec.nucleus_masked == rec.legal_count
    assert rec.collapsed == (rec.tag == "free" and top_p < 1 and rec.nucleus_masked == 1)


@settings(max_examples=200, deadline=None)
@given(logits_and_mask(), TEMPS, TOP_PS)
def test_allow_everything_is_the_identity(zm, t, top_p):
    z, _ = zm
    rec = StepStats(SamplingParams(temperature=t, top_p=top_p)).compute(z, np.ones(len(z), bool))
    assert rec.Z == 1.0 and rec.kl == 0.0
    assert rec.nucleus_raw == rec.nucleus_masked
    assert not rec.nucleus_changed and not rec.top_changed
    unconstrained = StepStats(SamplingParams(temperature=t, top_p=top_p)).compute(z, None)
    assert (unconstrained.Z, unconstrained.nucleus_raw, unconstrained.legal_count) == (1.0, rec.nucleus_raw, len(z))


@settings(max_examples=200, deadline=None)
@given(logits_and_mask(), st.sampled_from([0.3, 0.7, 1.0, 1.5]), st.floats(0.05, 0.99))
def test_masked_nucleus_is_what_the_sampler_draws_from(zm, t, top_p):
    z, mask = zm
    params = SamplingParams(temperature=t, top_p=top_p)
    ids, _ = Sampler(params).distribution(z, mask)
    rec = StepStats(params).compute(z, mask)
    assert rec.nucleus_masked == len(ids)


@settings(max_examples=100, deadline=None)
@given(st.integers(2, 60), st.integers(0, 59), TEMPS, TOP_PS, st.data())
def test_forced_step(n, which, t, top_p, data):
    which %= n
    z = data.draw(hnp.arrays(np.float32, n, elements=st.floats(-30, 30, width=32)))
    mask = np.zeros(n, bool)
    mask[which] = True
    rec = StepStats(SamplingParams(temperature=t, top_p=top_p)).compute(z, mask)
    assert rec.tag == "forced" and rec.nucleus_masked == 1 and not rec.collapsed
    p = np.exp(z.astype(np.float64) - log_sum_exp(z))
    assert rec.Z == pytest.approx(p[which], rel=1e-9)


def test_greedy_nucleus_is_the_argmax():
    z = np.array([0.0, 3.0, 1.0, 3.0], np.float32)
    mask = np.array([True, False, True, False])
    rec = StepStats(SamplingParams(temperature=0, top_p=0.9)).compute(z, mask)
    assert (rec.nucleus_raw, rec.nucleus_masked) == (1, 1)
    assert rec.top_changed and rec.nucleus_changed and rec.collapsed
    rec1 = StepStats(SamplingParams(temperature=0, top_p=1.0)).compute(z, mask)
    assert (rec1.nucleus_raw, rec1.nucleus_masked, rec1.collapsed) == (4, 2, False)


def test_empty_legal_set_is_an_error():
    with pytest.raises(ValueError, match="empty"):
        StepStats(SamplingParams()).compute(np.zeros(3, np.float32), np.zeros(3, bool))


def test_extreme_mass_keeps_kl_exact():
    z = np.array([0.0, -900.0], np.float32)
    rec = StepStats(SamplingParams()).compute(z, np.array([False, True]))
    assert rec.kl == pytest.approx(900.0)
    assert 0 <= rec.Z < 1e-300


# -- with the engine: a grammar that allows everything ----------------------------------


def test_any_text_grammar_on_a_text_only_vocabulary_is_the_identity():
    vocab = Vocabulary.from_bytes([b"<eos>", b"a", b"b", b" c", b"\xc3\xa9", b"\n"], eog_ids=[0])
    vocab = Vocabulary.from_bytes([b"", *vocab.tokens[1:]], eog_ids=[0], control_text={0: "<eos>"})
    g = Grammar({"root": Repeat(CharClass((), negated=True), 0, None)}, root="root", source="<any>")
    m = Matcher(compile_grammar(g, vocab, use_cache=False))
    rng = np.random.default_rng(0)
    stats = StepStats(SamplingParams(temperature=0.7, top_p=0.9), vocab)
    for step in range(4):
        mask = m.mask()
        assert mask.all()  # every text token, and EOG because any prefix is complete
        z = rng.normal(size=vocab.n_logits).astype(np.float32) * 4
        rec = stats.record(Step(step, 1, b"a", z, mask, 3.0))
        assert rec.Z == 1.0 and rec.nucleus_raw == rec.nucleus_masked and not rec.nucleus_changed
        m.advance(1)


def test_record_names_control_tokens_and_keeps_stray_bytes():
    vocab = Vocabulary.from_bytes([b"", b"a", b"\xe2"], eog_ids=[0], control_text={0: "</s>"})
    stats = StepStats(SamplingParams(), vocab)
    z = np.zeros(3, np.float32)
    eos = stats.record(Step(4, 0, b"", z, None, 0.0))
    assert (eos.token, eos.control, eos.step) == ("</s>", True, 4)
    assert eos.to_record()["control"] is True
    stray = stats.record(Step(5, 2, b"\xe2", z, None, 0.0))
    assert stray.token == "\ufffd" and stray.token_bytes == b"\xe2"
    assert stray.to_record()["hex"] == "e2"
    assert "hex" not in stats.record(Step(6, 1, b"a", z, None, 0.0)).to_record()


# -- summary ----------------------------------------------------------------------------


@settings(max_examples=100, deadline=None)
@given(st.lists(logits_and_mask(max_size=30), min_size=1, max_size=8), TEMPS, TOP_PS)
def test_summary_aggregates(steps, t, top_p):
    stats = StepStats(SamplingParams(temperature=t, top_p=top_p))
    recs = [stats.compute(z, m, step=i) for i, (z, m) in enumerate(steps)]
    s = summarize(recs)
    free = [r for r in recs if r.tag == "free"]
    assert s.steps == len(recs) and s.forced + s.free == s.steps and s.free == len(free)
    assert s.collapsed == sum(r.collapsed for r in free)
    assert s.collapse_rate == (s.collapsed / len(free) if free else None)
    assert s.mean_Z == pytest.approx(np.mean([r.Z for r in recs]))
    assert s.min_Z == min(r.Z for r in recs) and recs[s.min_Z_step].Z == s.min_Z
    assert s.total_kl == pytest.approx(sum(r.kl for r in recs))
    assert set(s.to_record()) >= {"forced", "free", "mean_Z", "min_Z", "min_Z_step", "collapse_rate", "total_kl"}


def test_empty_summary_is_null_not_nan():
    s = summarize([]).to_record()
    assert s["collapse_rate"] is None and s["mean_Z"] is None and s["min_Z"] is None
    assert s["total_kl"] == 0


# -- speed --------------------------------------------------------------------------------


@pytest.mark.parametrize("t", [0.3, 1.0])
def test_ties_at_the_nucleus_boundary(t):
    # 69 equal legal logits, top_p = 1/3: the cumulative mass lands on top_p up to rounding
    z = np.full(78, -1.0, np.float32)
    z[0] = 0.0
    mask = np.zeros(78, bool)
    mask[9:] = True
    params = SamplingParams(temperature=t, top_p=1 / 3)
    rec = StepStats(params).compute(z, mask)
    ref = ref_stats(z, mask, t, 1 / 3)
    assert rec.nucleus_masked == len(ref["masked"])
    ids, _ = Sampler(params).distribution(z, mask)
    assert set(ids.tolist()) == ref["masked"]
