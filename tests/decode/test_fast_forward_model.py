"""Fast-forward on the real bundled model: one batch for a dictated output, outputs in the
language on random grammars, the trace laws, determinism, and --no-fast-forward."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.decode.loop import generate
from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.stats import FAST_FORWARD, FORCED
from ministruct.diagnostics.trace import TraceWriter
from ministruct.engine.automaton import accepts, accepts_prefix
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.grammar.constraint import load_constraint
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq
from ministruct.jobs.job import GenerationJob

CONJ = Path(__file__).resolve().parents[2] / "samples" / "conj.json"
DICTATED = r'\{"name": "ministruct", "kind": "library"\}'


@pytest.fixture(scope="module")
def prompt_ids(model):
    return model.encode_prompt("Describe this project as JSON.", chat=True)


def spy(model, monkeypatch) -> list[tuple[str, list[int]]]:
    """Record the decoder's calls to the model's evaluations (prefill, eval, eval_rows) on
    this test's model; a call made inside another one (prefill's own eval) is its part."""
    calls: list[tuple[str, list[int]]] = []
    depth = [0]
    for name in ("prefill", "eval", "eval_rows"):
        orig = getattr(model, name)

        def wrapped(ids, _orig=orig, _name=name):
            if not depth[0]:
                calls.append((_name, [int(t) for t in ids]))
            depth[0] += 1
            try:
                return _orig(ids)
            finally:
                depth[0] -= 1

        monkeypatch.setattr(model, name, wrapped)
    return calls


@pytest.mark.model
def test_dictated_output_is_one_batch_plus_the_end(model, vocab, prompt_ids, monkeypatch):
    calls = spy(model, monkeypatch)
    grammar = load_constraint(regex=DICTATED).grammar
    dec = generate(
        model,
        prompt_ids,
        Matcher(compile_grammar(grammar, vocab)),
        SamplingParams(temperature=0.7, seed=1),
        max_tokens=64,
    )
    steps = list(dec)
    res = dec.result
    assert res.output == b'{"name": "ministruct", "kind": "library"}' and res.complete
    assert res.stop_reason == "grammar_done" and len(steps) == res.n_fast_forward == res.n_tokens >= 3
    assert all(s.fast_forward and s.mask[s.token_id] for s in steps)
    assert res.tokens == model.tokenize_bytes(res.output)  # the tokenizer's own split
    # the prompt, then one batch: every token but the last, whose row nothing needs
    assert calls == [("prefill", prompt_ids), ("eval_rows", res.tokens[:-1])]
    monkeypatch.undo()
    # the batch's last row is exactly what llama.cpp gives for the same batch
    model.reset()
    model.eval(prompt_ids)
    model.eval(res.tokens[:-1])
    assert np.array_equal(model.logits(), steps[-1].logits)
    # every row is the model's row at that position: token by token, llama.cpp's kernels
    # round differently (up to ~0.5 logits on this model), but a row from another position
    # would not be this close
    model.reset()
    model.eval(prompt_ids)
    for s in steps:
        seq = model.logits()
        assert np.corrcoef(seq, s.logits)[0, 1] > 0.99, s.index
        model.eval([s.token_id])


@pytest.mark.model
def test_no_fast_forward_evaluates_one_token_at_a_time(model, vocab, prompt_ids, monkeypatch):
    calls = spy(model, monkeypatch)
    grammar = load_constraint(regex=DICTATED).grammar
    dec = generate(
        model,
        prompt_ids,
        Matcher(compile_grammar(grammar, vocab)),
        SamplingParams(temperature=0.7, seed=1),
        max_tokens=64,
        fast_forward=False,
    )
    steps = list(dec)
    assert dec.result.output == b'{"name": "ministruct", "kind": "library"}'
    assert not any(s.fast_forward for s in steps) and dec.result.n_fast_forward == 0
    assert calls[0] == ("prefill", prompt_ids)
    assert [c for c in calls[1:]] == [("eval", [t]) for t in dec.result.tokens[:-1]]


WORDS = ['{"', '": ', '", "', '"}', "name", "kind", "true", "null", ", ", "[1, ", "]"]
words = st.sampled_from(WORDS).map(Literal)
classes = st.sampled_from([CharClass(((0x61, 0x7A),)), CharClass(((0x30, 0x39),))])


def grammars():
    leaf = words | classes
    return st.recursive(
        leaf,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=4).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(lambda t: Repeat(t[0], t[1], t[1] + t[2])),
        ),
        max_leaves=5,
    ).map(lambda e: Grammar({"root": Seq((Literal('{"value": '), e, Literal("}")))}))  # dictated ends


@pytest.mark.model
@settings(
    max_examples=6, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.function_scoped_fixture]
)
@given(grammar=grammars(), seed=st.integers(0, 100), extra=st.integers(0, 4))
def test_random_grammars_outputs_are_in_the_language(model, vocab, prompt_ids, grammar, seed, extra):
    matcher = Matcher(compile_grammar(grammar, vocab, use_cache=False))
    least = matcher.min_tokens_to_complete()
    assert least is not None
    max_tokens = max(1, min(least + extra, 24))
    if least > max_tokens:
        return  # too long for a quick example: nothing to generate within the budget
    dec = generate(
        model, prompt_ids, matcher, SamplingParams(temperature=1.0, top_p=0.95, seed=seed), max_tokens=max_tokens
    )
    steps = list(dec)
    res = dec.result
    assert len(res.tokens) <= max_tokens and res.complete
    assert accepts(grammar, res.output) and accepts_prefix(grammar, res.output)
    assert all(s.mask[s.token_id] for s in steps)
    assert b"".join(s.token for s in steps) == res.output


def conj_job(model, **kw) -> GenerationJob:
    return GenerationJob(
        model,
        load_constraint(schema=str(CONJ)),
        SamplingParams(temperature=0.8, top_p=0.9, seed=5),
        max_tokens=64,
        **kw,
    )


@pytest.mark.model
def test_trace_laws_hold_with_fast_forward(model):
    tracer = TraceWriter(None, conj_job(model))
    res = tracer.run("Conjugate 'comer' in the present, 1st person plural.", seed=5)
    recs, summary = tracer.records, tracer.summary
    assert res.complete and summary is not None
    assert summary.fast_forward >= 5  # the keys and punctuation between the values
    assert summary.sampled + summary.fast_forward == summary.steps == len(recs)
    for r in recs:
        assert 0 < r.Z <= 1 and r.kl >= 0
        if r.legal_count == 1:
            assert r.nucleus_masked == 1 and not r.collapsed
        if r.tag in (FAST_FORWARD, FORCED):
            assert not r.collapsed
    assert "".join(r.token for r in recs if not r.control) == res.output


@pytest.mark.model
def test_same_seed_same_output_with_fast_forward(model):
    job = conj_job(model)
    prompt = "Conjugate 'vivir' in the future, 3rd person."
    runs = [job.run(prompt, seed=s) for s in (2, 2, 3, 3)]
    assert runs[0].output == runs[1].output and runs[2].output == runs[3].output
    assert runs[0].generation.tokens == runs[1].generation.tokens
    assert all(r.complete and r.generation.n_fast_forward > 0 for r in runs)


@pytest.mark.model
def test_rows_of_dictated_tokens_change_nothing_but_the_steps(model, monkeypatch):
    """gen without a trace evaluates fast-forwarded stretches without their logits rows
    (GenerationJob.run, no on_step): on the real model the row the next draw reads is
    bit for bit the one the batch with every row gives, so the outputs are the same; the
    traced run's steps all carry rows, the plain run's dictated steps none."""
    calls = spy(model, monkeypatch)
    job = conj_job(model)
    prompt = "Conjugate 'vivir' in the future, 3rd person."
    for seed in (0, 1, 2):
        seen: list = []
        traced = job.run(prompt, seed=seed, on_step=seen.append)
        assert any(s.fast_forward for s in seen) and all(s.logits is not None for s in seen)
        del calls[:]
        plain = job.run(prompt, seed=seed)
        assert plain.generation.tokens == traced.generation.tokens and plain.output == traced.output
        assert plain.warnings == traced.warnings
        assert not any(kind == "eval_rows" for kind, _ in calls)
