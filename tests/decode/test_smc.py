"""Particles on a hand-made model (a fixed table of next-token distributions, no llama.cpp):
masked sampling's exact output distribution against the exact conditional, the particle
sampler's estimates against both, and the identity laws.

The exact values come from brute force over every token sequence of the tiny vocabulary,
with the language checked by `re.fullmatch` on the text (not by the engine's matcher)."""

from __future__ import annotations

import functools
import math
import re
import zlib
from collections import defaultdict

import numpy as np
import pytest

from ministruct.decode.exact import enumerate_language, exact_draw, small_language
from ministruct.decode.loop import Decoder
from ministruct.decode.sampling import SamplingParams
from ministruct.decode.smc import Particles, effective_size, log_mean_weight, systematic
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.constraint import Constraint

TOKENS = [b"a", b"b", b"c", b"ab", b"bc"]
EOG = len(TOKENS)
VOCAB = Vocabulary.from_bytes(TOKENS + [b""], eog_ids=[EOG])
PROMPT = [0]
# a finite language where the model's favourite first token ("a", see logits_for) leads into
# a prefix the grammar then starves
LANGUAGE = ["ab", "abc", "bc", "cab", "ca", "b"]
PATTERN = "|".join(LANGUAGE)


def logits_for(prefix: tuple[int, ...]) -> np.ndarray:
    """The table: a fixed pseudo-random logits row for each prefix of output tokens."""
    seed = zlib.crc32(repr(prefix).encode())
    z = np.random.default_rng(seed).normal(0.0, 1.5, len(TOKENS) + 1)
    if not prefix:
        z[0] += 2.0  # the model likes to begin with "a"
    return z.astype(np.float32)


class TableModel:
    """The hand-made model: a cache per particle is the list of its output tokens. It also
    serves Decoder (prefill / eval / logits), for the identity law with today's sampler."""

    n_ctx = 512

    def __init__(self) -> None:
        self.vocabulary = VOCAB
        self.n_logits = VOCAB.n_logits
        self.caches: list[list[int]] = []
        self._tokens: list[int] = []
        self.extend_calls = 0

    # ParticleModel
    def begin(self, prompt, n):
        self.prompt = list(prompt)
        self.caches = [[] for _ in range(n)]
        return logits_for(())

    def extend(self, work):
        self.extend_calls += 1
        out = []
        for i, t in work:
            self.caches[i].append(t)
            out.append(logits_for(tuple(self.caches[i])))
        return out

    def copy(self, src, dst):
        self.caches[dst] = list(self.caches[src])

    # Decoder's model
    def prefill(self, tokens):
        self._tokens = list(tokens)
        return 0

    def eval(self, tokens):
        self._tokens.extend(tokens)

    def logits(self):
        return logits_for(tuple(self._tokens[len(PROMPT) :]))

    # fast-forward's
    def tokenize_bytes(self, data: bytes) -> list[int]:
        """Longest match first, as a BPE tokenizer would on this vocabulary."""
        out = []
        while data:
            t = max((i for i, tok in enumerate(TOKENS) if data.startswith(tok)), key=lambda i: len(TOKENS[i]))
            out.append(t)
            data = data[len(TOKENS[t]) :]
        return out

    def eval_rows(self, tokens):
        rows = []
        for t in tokens:
            self._tokens.append(t)
            rows.append(self.logits())
        return np.array(rows)


@functools.cache
def compiled_for(pattern: str):
    return compile_grammar(Constraint.from_regex(pattern).grammar, VOCAB)


def matcher_for(pattern: str) -> Matcher:
    return Matcher(compiled_for(pattern))


def run(pattern, params, n, max_tokens=6, **kw):
    model = TableModel()
    m = matcher_for(pattern) if pattern is not None else None
    return Particles(model, PROMPT, m, params, n=n, max_tokens=max_tokens, **kw).run()


# -- the exact values (brute force) ---------------------------------------------------


def base_probs(z: np.ndarray, temperature: float) -> np.ndarray:
    z = np.asarray(z, np.float64) / temperature
    e = np.exp(z - z.max())
    return e / e.sum()


def exact(language, temperature=1.0, max_tokens=6):
    """(target, masked, p_valid): the base conditioned on validity, masked sampling's
    output distribution, and P(valid), each over output texts."""
    prefixes = {w[:i] for w in language for i in range(len(w) + 1)}
    target, masked = defaultdict(float), defaultdict(float)

    def walk(seq, text, p_base, p_masked):
        b = base_probs(logits_for(tuple(seq)), temperature)
        if len(seq) == max_tokens:
            if text in language:
                target[text] += p_base
                masked[text] += p_masked
            return
        legal = [t for t in range(len(TOKENS)) if text + TOKENS[t].decode() in prefixes]
        ends = text in language
        z = b[legal].sum() + (b[EOG] if ends else 0.0)
        if ends:
            target[text] += p_base * b[EOG]
            # masked sampling: the end is drawn among the legal tokens, or dictated alone
            masked[text] += p_masked * (b[EOG] / z if legal else 1.0)
        for t in legal:
            walk(seq + [t], text + TOKENS[t].decode(), p_base * b[t], p_masked * b[t] / z)

    walk([], "", 1.0, 1.0)
    p_valid = sum(target.values())
    return {k: v / p_valid for k, v in target.items()}, dict(masked), p_valid


def tv(p, q):
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


# -- masked sampling is not the conditional ---------------------------------------------


def test_masked_sampling_differs_from_the_conditional_exactly():
    target, masked, p_valid = exact(LANGUAGE)
    assert 0 < p_valid < 1
    assert abs(sum(masked.values()) - 1) < 1e-12 and abs(sum(target.values()) - 1) < 1e-12
    assert tv(target, masked) > 0.1


def test_masked_sampling_draws_what_the_exact_masked_distribution_says():
    """The oracle of the test above describes today's sampler: 2000 draws of the Decoder."""
    _, masked, _ = exact(LANGUAGE)
    counts = defaultdict(int)
    draws = 2000
    for seed in range(draws):
        dec = Decoder(TableModel(), PROMPT, matcher_for(PATTERN), SamplingParams(seed=seed), max_tokens=6)
        counts[dec.run().text] += 1
    for text, q in masked.items():
        se = math.sqrt(q * (1 - q) / draws)
        assert abs(counts[text] / draws - q) < 5 * se + 1e-9, text


# -- the particles match the exact values ------------------------------------------------


@pytest.mark.parametrize("n,temperature", [(1, 1.0), (4, 1.0), (8, 0.7)])
def test_particle_estimates_match_the_exact_values(n, temperature):
    """Over many seeds, (1/N) sum_i w_i [x_i = s] is an unbiased estimate of the base's
    probability of writing s (and its sum, p_valid, of P(valid)): each mean is within five
    standard errors of the exact value, the standard errors taken from the draws."""
    target, masked, p_valid = exact(LANGUAGE, temperature)
    runs = 600
    per_run = defaultdict(lambda: np.zeros(runs))
    p_hat = np.zeros(runs)
    for seed in range(runs):
        res = run(PATTERN, SamplingParams(seed=seed, temperature=temperature), n, fast_forward=False)
        for text, lw in res.particles:
            per_run[text.decode()][seed] += math.exp(lw) / n
        p_hat[seed] = res.p_valid
        assert res.generation.complete
    for text, pi in target.items():
        got = per_run[text]
        se = got.std(ddof=1) / math.sqrt(runs)
        assert abs(got.mean() - pi * p_valid) < 5 * se + 1e-12, (text, got.mean(), pi * p_valid, se)
    se = p_hat.std(ddof=1) / math.sqrt(runs)
    assert abs(p_hat.mean() - p_valid) < 5 * se + 1e-12
    # and the tolerance is tight enough to tell the masked distribution apart
    est = {t: per_run[t].mean() / p_hat.mean() for t in per_run}
    assert tv(est, target) < tv(masked, target) / 2


def test_resampling_happens_and_keeps_the_estimate_unbiased():
    target, _, p_valid = exact(LANGUAGE)
    runs, n = 400, 16
    p_hat = np.zeros(runs)
    resampled = 0
    for seed in range(runs):
        res = run(PATTERN, SamplingParams(seed=seed), n, ess=0.9, fast_forward=False)
        p_hat[seed] = res.p_valid
        resampled += res.resamples
        assert 0 < res.ess_min <= n
    assert resampled > runs / 2  # most runs resample
    se = p_hat.std(ddof=1) / math.sqrt(runs)
    assert abs(p_hat.mean() - p_valid) < 5 * se


def test_the_returned_particle_follows_the_conditional_with_many_particles():
    target, masked, _ = exact(LANGUAGE)
    runs, n = 400, 32
    counts = defaultdict(int)
    for seed in range(runs):
        counts[run(PATTERN, SamplingParams(seed=seed), n, fast_forward=False).generation.text] += 1
    got = {k: v / runs for k, v in counts.items()}
    assert tv(got, target) < tv(masked, target) / 2


# -- the identity laws --------------------------------------------------------------------


@pytest.mark.parametrize(
    "params",
    [SamplingParams(), SamplingParams(temperature=0.6, top_k=3), SamplingParams(top_p=0.8, repeat_penalty=1.3)],
)
@pytest.mark.parametrize("pattern", [PATTERN, "ab(cab)?c|cabca|b"])
def test_one_particle_draws_what_todays_sampler_draws_for_every_seed(params, pattern):
    """The same tokens for 300 seeds, fast-forward on (the second pattern dictates stretches)."""
    from dataclasses import replace

    dictated = 0
    for seed in range(300):
        p = replace(params, seed=seed)
        want = Decoder(TableModel(), PROMPT, matcher_for(pattern), p, max_tokens=8).run()
        got = run(pattern, p, 1, max_tokens=8).generation
        assert (got.tokens, got.stop_reason) == (want.tokens, want.stop_reason), seed
        assert got.n_fast_forward == want.n_fast_forward
        dictated += got.n_fast_forward
    assert dictated > 0 or pattern == PATTERN


def test_one_particle_weighs_its_output_by_the_legal_masses():
    """With one particle at temperature 1 the weight is prod Z_t, the end included."""
    for seed in range(50):
        res = run(PATTERN, SamplingParams(seed=seed), 1, fast_forward=False)
        seq, lw = [], 0.0
        m = matcher_for(PATTERN)
        for step in res.steps:
            b = base_probs(logits_for(tuple(seq)), 1.0)
            lw += math.log(b[m.mask()].sum())
            if step.token_id != EOG:
                m.advance(step.token_id)
                seq.append(step.token_id)
        if res.generation.stop_reason == "grammar_done":
            lw += math.log(base_probs(logits_for(tuple(seq)), 1.0)[EOG])
        assert res.log_weight == pytest.approx(lw, rel=1e-9, abs=1e-12)
        assert res.p_valid == pytest.approx(math.exp(lw))


@pytest.mark.parametrize("n", [1, 5])
def test_a_grammar_that_allows_everything_weighs_one(n):
    for seed in range(30):
        res = run("[abc]*", SamplingParams(seed=seed), n)
        assert res.p_valid == pytest.approx(1.0, abs=1e-12)
        assert all(lw == pytest.approx(0.0, abs=1e-12) for _, lw in res.particles)
        assert res.resamples == 0 and res.ess_min == pytest.approx(n)


def test_without_end_weight_the_final_end_is_not_weighed():
    with_end = run("ab|ca", SamplingParams(seed=3), 1, fast_forward=False)
    without = run("ab|ca", SamplingParams(seed=3), 1, fast_forward=False, end_weight=False)
    assert with_end.generation.tokens == without.generation.tokens
    text = with_end.generation.tokens
    b_end = base_probs(logits_for(tuple(text)), 1.0)[EOG]
    assert with_end.log_weight == pytest.approx(without.log_weight + math.log(b_end))


def test_particles_step_together():
    """One extend call per round, for every particle."""
    model = TableModel()
    Particles(model, PROMPT, matcher_for(PATTERN), SamplingParams(seed=1), n=8, max_tokens=6).run()
    assert model.extend_calls <= 6


# -- the pieces --------------------------------------------------------------------------


def test_systematic_resampling_keeps_expected_counts():
    w = np.array([0.1, 0.0, 0.6, 0.3])
    for u in np.linspace(0, 0.999, 50):
        parents = systematic(np.log(np.maximum(w, 1e-300)), float(u))
        counts = np.bincount(parents, minlength=4)
        assert all(abs(counts[i] - 4 * w[i]) < 1 for i in range(4))
        assert parents == sorted(parents)


def test_effective_size_and_mean_weight():
    assert effective_size(np.zeros(7)) == pytest.approx(7)
    assert effective_size(np.array([0.0, -np.inf, -np.inf])) == pytest.approx(1)
    assert effective_size(np.full(3, -np.inf)) == 0
    assert math.exp(log_mean_weight(np.log([0.2, 0.4]))) == pytest.approx(0.3)
    assert log_mean_weight(np.full(2, -np.inf)) == -math.inf


def test_the_language_oracle_agrees_with_the_engine():
    """The brute force checks the language with `re`; the engine's matcher agrees on it."""
    for w in ["ab", "abc", "b", "ca", "cab", "bc", "a", "abcc", "c"]:
        m = matcher_for(PATTERN)
        ok = True
        for ch in w:
            t = TOKENS.index(ch.encode())
            if not m.mask()[t]:
                ok = False
                break
            m.advance(t)
        assert (ok and m.is_accepting()) == bool(re.fullmatch(PATTERN, w)), w


# -- a small language enumerated ----------------------------------------------------------


@pytest.mark.parametrize("temperature", [1.0, 0.7])
def test_the_enumeration_is_the_exact_conditional(temperature):
    target, _, p_valid = exact(LANGUAGE, temperature)
    params = SamplingParams(temperature=temperature)
    enum = enumerate_language(
        lambda seq: logits_for(seq), PROMPT, matcher_for(PATTERN), params, [EOG], max_tokens=6, tolerance=0.0
    )
    assert enum is not None and enum.left_out == 0
    assert enum.p_valid == pytest.approx(p_valid, rel=1e-9)
    got = {k.decode(): v for k, v in enum.distribution(VOCAB).items()}
    assert tv(got, target) < 1e-9
    _, masked, _ = exact(LANGUAGE, temperature)
    assert tv({k.decode(): v for k, v in enum.masked_distribution(VOCAB).items()}, masked) < 1e-9


def test_exact_draws_follow_the_conditional():
    target, _, _ = exact(LANGUAGE)
    enum = enumerate_language(
        lambda seq: logits_for(seq), PROMPT, matcher_for(PATTERN), SamplingParams(), [EOG], max_tokens=6
    )
    draws = 3000
    counts = defaultdict(int)
    rng = np.random.default_rng(0)
    for _ in range(draws):
        seq, steps, stop, _ = exact_draw(enum, rng, VOCAB, 6, matcher_for(PATTERN))
        text = b"".join(TOKENS[t] for t in seq).decode()
        assert [s.token_id for s in steps if s.token_id != EOG] == list(seq)
        assert stop in ("eos", "grammar_done")
        counts[text] += 1
    for text, pi in target.items():
        assert abs(counts[text] / draws - pi) < 5 * math.sqrt(pi * (1 - pi) / draws) + 1e-9, text


def test_a_large_language_is_not_enumerated():
    assert (
        enumerate_language(
            lambda seq: logits_for(seq), PROMPT, matcher_for("[abc]*"), SamplingParams(), [EOG], max_tokens=6
        )
        is None
    )


def test_the_tolerance_leaves_out_unlikely_prefixes_and_says_how_much():
    enum = enumerate_language(
        lambda seq: logits_for(seq), PROMPT, matcher_for(PATTERN), SamplingParams(), [EOG], max_tokens=6, tolerance=0.05
    )
    full = enumerate_language(
        lambda seq: logits_for(seq), PROMPT, matcher_for(PATTERN), SamplingParams(), [EOG], max_tokens=6, tolerance=0.0
    )
    assert enum.left_out > 0 and enum.nodes < full.nodes
    assert full.p_valid - enum.p_valid <= enum.left_out + 1e-12


def test_the_shape_check_needs_no_model():
    assert small_language(matcher_for(PATTERN), [EOG], max_tokens=6)
    assert small_language(matcher_for("[abc]*"), [EOG], max_tokens=6, limit=50)  # narrow: worth trying
    wide = Vocabulary.from_bytes([bytes([c]) for c in range(33, 33 + 70)] + [b""], eog_ids=[70])
    m = Matcher(compile_grammar(Constraint.from_regex("[!-~]+").grammar, wide))
    assert not small_language(m, [70], max_tokens=6)  # more legal tokens at a prefix than EXACT_BRANCH


def test_the_budget_is_part_of_the_language():
    """With max_tokens 3, "cabca" (four tokens at least) cannot be written, and "abcab" only
    as ab|c|ab, cut by the budget without an end: the estimates still match brute force."""
    language = ["abcab", "ab", "cabca", "ca"]
    pattern = "|".join(language)
    target, masked, p_valid = exact(language, max_tokens=3)
    assert "cabca" not in target and "abcab" in target
    runs, n = 500, 4
    per_run = defaultdict(lambda: np.zeros(runs))
    p_hat = np.zeros(runs)
    for seed in range(runs):
        res = run(pattern, SamplingParams(seed=seed), n, max_tokens=3, fast_forward=False)
        assert res.generation.complete and res.generation.text in target
        for text, lw in res.particles:
            per_run[text.decode()][seed] += math.exp(lw) / n
        p_hat[seed] = res.p_valid
    for text, pi in target.items():
        got = per_run[text]
        se = got.std(ddof=1) / math.sqrt(runs)
        assert abs(got.mean() - pi * p_valid) < 5 * se + 1e-12, text
    se = p_hat.std(ddof=1) / math.sqrt(runs)
    assert abs(p_hat.mean() - p_valid) < 5 * se


DICTATED = ["abcabc", "abc", "cabca", "b"]  # after "c", "abca" is dictated: ab|c|a, a|bc|a, a|b|c|a ...


def test_two_particles_or_more_weigh_every_tokenization_of_a_dictated_stretch():
    """Fast-forward asked for, N = 4: the estimates still match brute force over every
    tokenization (the particles draw dictated stretches token by token)."""
    target, _, p_valid = exact(DICTATED, max_tokens=8)
    runs, n = 400, 4
    per_run = defaultdict(lambda: np.zeros(runs))
    for seed in range(runs):
        res = run("|".join(DICTATED), SamplingParams(seed=seed), n, max_tokens=8)
        assert res.generation.n_fast_forward == 0
        for text, lw in res.particles:
            per_run[text.decode()][seed] += math.exp(lw) / n
    for text, pi in target.items():
        got = per_run[text]
        se = got.std(ddof=1) / math.sqrt(runs)
        assert abs(got.mean() - pi * p_valid) < 5 * se + 1e-12, text


def test_one_particle_weighs_a_dictated_token_by_its_own_probability():
    pattern = "|".join(DICTATED)
    seen = 0
    for seed in range(60):
        res = run(pattern, SamplingParams(seed=seed), 1, max_tokens=8)
        seq, lw = [], 0.0
        m = matcher_for(pattern)
        for step in res.steps:
            b = base_probs(logits_for(tuple(seq)), 1.0)
            lw += math.log(b[step.token_id] if step.fast_forward else b[m.mask()].sum())
            seen += step.fast_forward
            if step.token_id != EOG:
                m.advance(step.token_id)
                seq.append(step.token_id)
        if res.generation.stop_reason == "grammar_done":
            lw += math.log(base_probs(logits_for(tuple(seq)), 1.0)[EOG])
        assert res.log_weight == pytest.approx(lw, rel=1e-9, abs=1e-12)
    assert seen > 0
