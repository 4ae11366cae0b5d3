"""Particles on the bundled model: closer to the exact conditional than masked sampling, on
three finite constraints; the estimates of particles proper agree with the enumeration."""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import replace

import numpy as np
import pytest

from ministruct.decode.exact import enumerate_language
from ministruct.decode.particles import ParticleContexts, ParticleDecoder, PrefixRows
from ministruct.decode.sampling import SamplingParams
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.job import GenerationJob

pytestmark = pytest.mark.model

BASE = SamplingParams(temperature=1.0, top_p=1.0)
CASES = {
    "choice": ("Which is a fruit?", lambda: Constraint.from_choices(["The potato", "An apple", "banana"])),
    "enum": ("What colour is grass?", lambda: Constraint.from_json_schema({"enum": ["green", "red", "blue", "The colour of sand"]})),
    "regex": ("How many legs does a dog have?", lambda: Constraint.from_regex("[0-9]")),
}  # fmt: skip
DRAWS = 200
MAX_TOKENS = 16


@pytest.fixture(scope="module")
def contexts():
    c = ParticleContexts()
    yield c
    c.close()


def exact_of(job, prompt, contexts):
    dec = job.decoder(prompt)
    dec.start()
    rows = PrefixRows(contexts.get(job.model, 1, len(dec.prompt_tokens) + MAX_TOKENS + 1), dec.prompt_tokens)
    eog = sorted(job.model.vocabulary.eog_ids)
    enum = enumerate_language(
        rows, dec.prompt_tokens, dec.matcher.fork(), BASE, eog, max_tokens=MAX_TOKENS, tolerance=1e-6
    )
    assert enum is not None and enum.left_out < 1e-5 * enum.p_valid
    return enum


def tv(p, q):
    return 0.5 * sum(abs(p.get(k, 0.0) - q.get(k, 0.0)) for k in set(p) | set(q))


def particle_run(job, prompt, seed, n, contexts, cache, exact=True):
    plain = job.decoder(prompt, seed=seed)
    dec = ParticleDecoder(
        job.model, plain.prompt_tokens, plain.matcher, replace(BASE, seed=seed, particles=n),
        max_tokens=MAX_TOKENS, contexts=contexts, exact_cache=cache, exact=exact,
    )  # fmt: skip
    return dec.run()


@pytest.mark.parametrize("case", sorted(CASES))
def test_sixteen_particles_land_closer_to_the_exact_conditional_than_masked_sampling(model, contexts, case):
    prompt, make = CASES[case]
    job = GenerationJob(model, make(), BASE, max_tokens=MAX_TOKENS)
    ref = exact_of(job, prompt, contexts).distribution(model.vocabulary)
    masked = Counter(job.decoder(prompt, seed=s).run().output for s in range(DRAWS))
    cache: dict = {}
    gens = [particle_run(job, prompt, s, 16, contexts, cache) for s in range(DRAWS)]
    assert all(g.particles.method == "exact" and g.complete for g in gens)
    ours = Counter(g.output for g in gens)
    tv_masked = tv({k: v / DRAWS for k, v in masked.items()}, ref)
    tv_ours = tv({k: v / DRAWS for k, v in ours.items()}, ref)
    assert tv_ours < tv_masked, (tv_ours, tv_masked)


def test_particles_proper_estimate_p_valid_without_bias(model, contexts):
    """Particles with the enumeration off: the mean of p_valid over seeds is within five
    standard errors of the enumeration's exact P(valid)."""
    prompt, make = CASES["regex"]
    job = GenerationJob(model, make(), BASE, max_tokens=MAX_TOKENS)
    exact = exact_of(job, prompt, contexts).p_valid
    got = np.array([particle_run(job, prompt, s, 4, contexts, {}, exact=False).particles.p_valid for s in range(60)])
    se = got.std(ddof=1) / math.sqrt(len(got))
    assert abs(got.mean() - exact) < 5 * se + 1e-12 * exact, (got.mean(), exact, se)


@pytest.mark.parametrize(
    "params",
    [SamplingParams(), SamplingParams(temperature=1.0, top_p=1.0), SamplingParams(top_k=5, repeat_penalty=1.2)],
)
def test_one_particle_draws_todays_tokens_on_the_model_for_every_seed(model, params):
    """The identity law on the bundled model, with a schema whose keys and punctuation are
    dictated (fast-forwarded as today): 25 seeds, the same tokens, stop and fast-forwards."""
    schema = {"type": "object", "properties": {"answer": {"type": "integer"}}, "required": ["answer"]}
    plain = GenerationJob(model, Constraint.from_json_schema(schema), params, max_tokens=12)
    one = GenerationJob(model, plain.constraint, replace(params, particles=1), max_tokens=12)
    dictated = 0
    for seed in range(25):
        want = plain.decoder("How many legs does a spider have?", seed=seed).run()
        got = one.decoder("How many legs does a spider have?", seed=seed).run()
        assert (got.tokens, got.stop_reason) == (want.tokens, want.stop_reason), seed
        assert got.n_fast_forward == want.n_fast_forward
        assert got.particles.method == "smc" and 0 <= got.particles.p_valid <= 1
        dictated += got.n_fast_forward
    assert dictated > 0


def test_without_a_constraint_every_weight_is_one(model):
    """Nothing is refused, so the base is its own proposal: p_valid 1, log weight 0, for one
    particle and for several."""
    for n in (1, 3):
        job = GenerationJob(model, None, replace(BASE, particles=n), max_tokens=6)
        for seed in range(3):
            gen = job.decoder("Say something.", seed=seed).run()
            assert gen.particles.p_valid == pytest.approx(1.0, abs=1e-12)
            assert gen.particles.log_weight == pytest.approx(0.0, abs=1e-12)
            assert gen.particles.resamples == 0


def test_the_enumeration_scores_as_the_model_scores_one_token_at_a_time(model, contexts):
    """Every member's log probability in the enumeration (end included) equals scoring its
    tokens one at a time in the model's own context: llama.cpp's rows depend on the batch's
    shape (up to ~1 logit on this Q4 model), so the enumeration evaluates one token a decode,
    whatever order it visits the prefixes in."""
    schema = {"type": "object", "properties": {"sentiment": {"enum": ["positive", "negative", "neutral"]}}}
    prompt = "Is this review positive, negative or neutral? 'Great stuff.'"
    job = GenerationJob(model, Constraint.from_json_schema({**schema, "required": ["sentiment"]}), BASE, max_tokens=16)
    enum = exact_of(job, prompt, contexts)  # jumps between branches: several tokens at once before
    eog = sorted(model.vocabulary.eog_ids)
    prompt_tokens = job.prompt_tokens(prompt)
    for seq, lp, _ in sorted(enum.members, key=lambda m: -m[1])[:6]:
        model.reset()
        model.eval(prompt_tokens)
        direct = 0.0
        for t in [*seq, None]:
            row = model.logits().astype(np.float64)
            logp = row - np.logaddexp.reduce(row)
            direct += np.logaddexp.reduce(logp[eog]) if t is None else logp[t]
            if t is not None:
                model.eval([t])
        assert lp == pytest.approx(direct, abs=1e-6), seq
    model.reset()
