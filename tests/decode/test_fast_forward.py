"""Fast-forward in the decode loop (issue 11) on a fake batch-evaluating model.

The fake's logits are a pure function of the evaluated tokens, so a row computed in a
batch must equal the row computed one token at a time: every fast-forwarded Step can be
checked against an independent recomputation, and every legal set against a fresh
Matcher walked token by token.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.decode.fast_forward import plan
from ministruct.decode.loop import generate
from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.render import render_text, step_table, summary_panel
from ministruct.diagnostics.stats import FAST_FORWARD, StepStats, summarize
from ministruct.diagnostics.trace import TraceWriter
from ministruct.engine.automaton import accepts, accepts_prefix
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import BudgetTooSmall
from ministruct.grammar.constraint import load_constraint
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq
from ministruct.jobs.job import GenerationJob

TOKENS = [
    b"",
    b"{",
    b'"',
    b"a",
    b"b",
    b"1",
    b"2",
    b'{"',
    b'":',
    b'",',
    b"key",
    b"ke",
    b"y",
    b":",
    b"}",
    b'"}',
    b"x",
    b",",
    b"k",
    b"e",
    b" ",
    b"ab",
]
EOS = 0
VOCAB = Vocabulary.from_bytes(TOKENS, eog_ids=[EOS], control_text={EOS: "</s>"}, n_logits=24, name="fake")
PROMPT = [16, 16, 16]


def logits_after(tokens) -> np.ndarray:
    rng = np.random.default_rng([len(tokens), *tokens[-3:]])
    return (rng.standard_normal(VOCAB.n_logits) * 3).astype(np.float32)


class BatchModel:
    """Records every evaluation: ("prefill", ids), ("eval", ids) or ("rows", ids)."""

    vocabulary = VOCAB
    n_ctx = 4096
    name = "fake"
    path = Path("/nonexistent/fake.gguf")

    def __init__(self, split=None) -> None:
        self.tokens: list[int] = []
        self.calls: list[tuple[str, list[int]]] = []
        self.split = split  # a tokenizer override (bytes -> ids)

    def encode_prompt(self, prompt: str, *, chat: bool, system: str | None = None) -> list[int]:
        return list(PROMPT)

    def prefill(self, ids) -> int:
        self.tokens = list(ids)
        self.calls.append(("prefill", list(ids)))
        return 0

    def eval(self, ids) -> None:
        self.tokens += list(ids)
        self.calls.append(("eval", list(ids)))

    def eval_rows(self, ids) -> np.ndarray:
        rows = []
        for t in ids:
            self.tokens.append(int(t))
            rows.append(logits_after(self.tokens))
        self.calls.append(("rows", list(ids)))
        return np.asarray(rows, dtype=np.float32).reshape(len(rows), VOCAB.n_logits)

    def logits(self) -> np.ndarray:
        return logits_after(self.tokens)

    def tokenize_bytes(self, data: bytes) -> list[int]:
        """Greedy longest match (a stand-in for a real tokenizer)."""
        if self.split is not None:
            return self.split(data)
        out, i = [], 0
        while i < len(data):
            best = max(
                (t for t in range(1, len(TOKENS)) if TOKENS[t] and data.startswith(TOKENS[t], i)),
                key=lambda t: len(TOKENS[t]),
            )
            out.append(best)
            i += len(TOKENS[best])
        return out


def matcher_for(regex: str) -> Matcher:
    return Matcher(compile_grammar(load_constraint(regex=regex).grammar, VOCAB, use_cache=False))


GREEDY = SamplingParams(temperature=0.0)
WARM = SamplingParams(temperature=1.0, top_p=0.9, seed=3)


def check_against_token_by_token(steps, regex: str, max_tokens: int, *, budget_aware: bool = True) -> None:
    """Every Step's row and legal set, recomputed one token at a time."""
    fresh = matcher_for(regex)
    history = list(PROMPT)
    for s in steps:
        assert np.array_equal(s.logits, logits_after(history)), s.index
        remaining = max_tokens - s.index if budget_aware else None
        assert np.array_equal(s.mask, fresh.mask(remaining)), s.index
        assert s.mask[s.token_id]
        if s.token_id == EOS:
            break
        fresh.advance(s.token_id)
        history.append(s.token_id)


# -- the whole output dictated -----------------------------------------------------


def test_a_dictated_output_is_one_batch_then_done():
    m = BatchModel()
    regex = r'\{"key":"ab"\}'
    dec = generate(m, PROMPT, matcher_for(regex), WARM, max_tokens=30)
    steps = list(dec)
    res = dec.result
    assert res.output == b'{"key":"ab"}' and res.complete and res.stop_reason == "grammar_done"
    assert all(s.fast_forward for s in steps) and res.n_fast_forward == len(steps) == res.n_tokens
    # the prompt, then ONE batch: every planned token but the last (nothing follows it)
    assert m.calls == [("prefill", PROMPT), ("rows", res.tokens[:-1])]
    check_against_token_by_token(steps, regex, 30)


def test_boundary_token_stays_the_models_choice_where_a_token_spans_it():
    m = BatchModel()
    regex = r'\{"key":"\}?[ab]{1,3}"\}'
    dec = generate(m, PROMPT, matcher_for(regex), GREEDY, max_tokens=30)
    steps = list(dec)
    # {"key":" is dictated; its split is {" key ": ", and '"}' (legal after '{"key":') runs
    # past its end, so the last token is left to the model
    assert [s.token for s in steps[:3]] == [b'{"', b"key", b'":'] and all(s.fast_forward for s in steps[:3])
    assert not steps[3].fast_forward and steps[3].token in (b'"', b'"}')
    # the batch also evaluated the last fast-forwarded token: the next step needs no eval
    assert m.calls[:3] == [("prefill", PROMPT), ("rows", [7, 10, 8]), ("eval", [steps[3].token_id])]
    assert dec.result.complete
    check_against_token_by_token(steps, regex, 30)


def test_a_boundary_no_token_spans_is_dictated_too():
    m = BatchModel()
    regex = r'\{"key":"[ab]{1,3}"\}'
    dec = generate(m, PROMPT, matcher_for(regex), GREEDY, max_tokens=30)
    steps = list(dec)
    # no token legal after '{"key":' runs past the closing '"': the output breaks there
    # whatever the model picks, so the whole split is one batch, and its last row is the
    # next draw's (no eval of its own)
    assert [s.token for s in steps[:4]] == [b'{"', b"key", b'":', b'"'] and all(s.fast_forward for s in steps[:4])
    assert not steps[4].fast_forward and steps[4].token in (b"a", b"b", b"ab")
    assert m.calls[:3] == [("prefill", PROMPT), ("rows", [7, 10, 8, 2]), ("eval", [steps[4].token_id])]
    assert dec.result.complete
    check_against_token_by_token(steps, regex, 30)


def test_no_fast_forward_is_the_token_by_token_loop():
    regex = r'\{"key":"[ab]{1,3}"\}'
    on, off = BatchModel(), BatchModel()
    a = list(generate(on, PROMPT, matcher_for(regex), GREEDY, max_tokens=30))
    b = list(generate(off, PROMPT, matcher_for(regex), GREEDY, max_tokens=30, fast_forward=False))
    assert not any(s.fast_forward for s in b)
    assert all(kind in ("prefill", "eval") and (kind == "prefill" or len(ids) == 1) for kind, ids in off.calls)
    assert any(kind == "rows" for kind, _ in on.calls)
    check_against_token_by_token(b, regex, 30)
    # greedy, and the model's own choice in the dictated stretch is not the same split:
    # whatever it picked, both spell a string of the language
    assert accepts(load_constraint(regex=regex).grammar, b"".join(s.token for s in a))
    assert accepts(load_constraint(regex=regex).grammar, b"".join(s.token for s in b))


def test_an_illegal_split_falls_back_to_sampling():
    # a tokenizer that spells the bytes with a token the grammar does not allow here
    m = BatchModel(split=lambda data: [16] * len(data))
    regex = r'\{"key":"ab"\}'
    dec = generate(m, PROMPT, matcher_for(regex), GREEDY, max_tokens=30)
    steps = list(dec)
    assert not any(s.fast_forward for s in steps) and dec.result.output == b'{"key":"ab"}'
    # and a split that does not spell the bytes back is refused before anything is checked
    m2 = BatchModel(split=lambda data: [3])
    assert plan(m2, matcher_for(regex), 30, budget_aware=True) == ([], False)


def test_a_single_forced_byte_is_dictated_unless_a_token_spans_it():
    m = BatchModel()
    assert matcher_for(r"\}[ab]").forced_bytes() == b"}"
    assert plan(m, matcher_for(r"\}[ab]"), 10, budget_aware=True) == ([TOKENS.index(b"}")], False)
    # '"}' is legal where '"' is dictated: the model chooses between them
    assert matcher_for(r'"\}?[ab]').forced_bytes() == b'"'
    assert plan(m, matcher_for(r'"\}?[ab]'), 10, budget_aware=True) == ([], False)


def test_a_token_starting_inside_the_last_token_keeps_the_boundary_the_models():
    m = BatchModel()
    # '{"' is one token, but '{' then '"}' spells '{"}': the end of '{"' need not fall
    # between two tokens, so the model chooses how the stretch ends
    spans, breaks = matcher_for(r'\{"\}?[ab]'), matcher_for(r'\{"[ab]')
    assert spans.forced_bytes() == breaks.forced_bytes() == b'{"'
    assert spans.crosses(b'{"') and not breaks.crosses(b'{"')
    assert plan(m, spans, 10, budget_aware=True) == ([], False)
    assert plan(m, breaks, 10, budget_aware=True) == ([TOKENS.index(b'{"')], False)


def test_a_dictated_end_is_not_evaluated_when_no_row_is_read():
    m = BatchModel()
    dec = generate(m, PROMPT, matcher_for(r'[ab]"\}'), GREEDY, max_tokens=10, forced_logits=False)
    steps = list(dec)
    assert dec.result.complete and dec.result.output in (b'a"}', b'b"}')
    assert not steps[0].fast_forward and all(s.fast_forward for s in steps[1:])
    # the draw read the prompt's row; the dictated '"}' ends the output, and no row after
    # it or before its tokens is read, so the model evaluates nothing more
    assert m.calls == [("prefill", PROMPT)]
    # with the rows asked for, the same tokens, and the batch that gives the rows
    m2 = BatchModel()
    again = list(generate(m2, PROMPT, matcher_for(r'[ab]"\}'), GREEDY, max_tokens=10))
    assert [s.token_id for s in again] == [s.token_id for s in steps] and len(m2.calls) == 2


# -- the token budget --------------------------------------------------------------


@pytest.mark.parametrize("max_tokens", [1, 2, 3, 5])
def test_hard_cut_never_exceeds_max_tokens(max_tokens):
    m = BatchModel()
    dec = generate(m, PROMPT, matcher_for(r'\{"key":"ab"\}'), GREEDY, max_tokens=max_tokens, budget_aware=False)
    steps = list(dec)
    assert len(steps) == len(dec.result.tokens) == max_tokens and dec.result.stop_reason == "max_tokens"
    assert all(s.fast_forward for s in steps)


def test_budget_aware_fast_forward_keeps_a_completion_in_reach():
    regex = r'\{"key":"[ab]{0,8}"\}'
    least = matcher_for(regex).min_tokens_to_complete()
    with pytest.raises(BudgetTooSmall):
        list(generate(BatchModel(), PROMPT, matcher_for(regex), GREEDY, max_tokens=least - 1))
    for max_tokens in range(least, least + 6):
        for seed in range(3):
            dec = generate(
                BatchModel(),
                PROMPT,
                matcher_for(regex),
                SamplingParams(temperature=1.5, seed=seed),
                max_tokens=max_tokens,
            )
            steps = list(dec)
            assert dec.result.complete and len(dec.result.tokens) <= max_tokens
            check_against_token_by_token(steps, regex, max_tokens)


def test_a_split_longer_than_the_bound_is_cut_to_the_budget():
    """The budget counts a literal stretch by the longest tokens that spell it ('{"' 'key'
    '":' ...); a tokenizer that splits it finer must not fast-forward past the budget."""
    regex = r'\{"key":"[ab]{0,8}"\}'

    def one_byte(data: bytes) -> list[int]:
        return [TOKENS.index(bytes([b])) for b in data]

    least = matcher_for(regex).min_tokens_to_complete()
    lens = [
        len(plan(BatchModel(split=one_byte), matcher_for(regex), least + room, budget_aware=True)[0])
        for room in range(4)
    ]
    unbounded, _ = plan(BatchModel(split=one_byte), matcher_for(regex), 100, budget_aware=False)
    assert len(unbounded) == len(b'{"key":"')  # no token runs past the free value's start
    # no room: not even "{" fits (the bound crosses '{"' in one token); more room, more tokens
    assert lens[0] == 0 and lens == sorted(lens) and lens[1] < len(unbounded)
    dec = generate(BatchModel(split=one_byte), PROMPT, matcher_for(regex), GREEDY, max_tokens=least)
    steps = list(dec)
    assert dec.result.complete and len(dec.result.tokens) <= least
    check_against_token_by_token(steps, regex, least)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize(
    "regex", [r'\{"key":"ab"\}', r'\{"key":"[ab]{1,3}"\}', r'\{"key":"[ab12]{1,6}", ?"ke":[12]{1,3}\}']
)
def test_without_forced_logits_the_same_batches_give_the_same_output(regex, seed):
    """forced_logits=False: the same batches, evaluated without the dictated tokens' rows
    (eval, not rows), but for a last batch of dictated tokens that ends the output (no row
    of it is read); the same tokens and legal sets; only the fast-forwarded Steps lack a row."""
    p = SamplingParams(temperature=1.2, top_p=0.95, seed=seed)
    with_rows, without = BatchModel(), BatchModel()
    a = list(generate(with_rows, PROMPT, matcher_for(regex), p, max_tokens=40))
    b = list(generate(without, PROMPT, matcher_for(regex), p, max_tokens=40, forced_logits=False))
    assert [s.token_id for s in a] == [s.token_id for s in b] and any(s.fast_forward for s in b)
    batches, cheaper = [ids for _, ids in with_rows.calls], [ids for _, ids in without.calls]
    skipped_end = a[-1].fast_forward and with_rows.calls[-1][0] == "rows" and batches[:-1] == cheaper
    assert batches == cheaper or skipped_end
    assert all(kind != "rows" for kind, _ in without.calls)
    for x, y in zip(a, b):
        assert x.fast_forward == y.fast_forward and np.array_equal(x.mask, y.mask)
        if y.fast_forward:
            assert y.logits is None
        else:
            assert np.array_equal(x.logits, y.logits)


def test_a_job_computes_dictated_rows_only_for_whoever_reads_them():
    """GenerationJob.run without on_step leaves the fast-forwarded rows out (the fight
    monitor does not read them); with on_step (a trace) every step has its row."""
    job = GenerationJob(BatchModel(), load_constraint(regex=r'\{"key":"[ab]{1,3}"\}'), WARM, max_tokens=30)
    seen: list = []
    traced = job.run("x", on_step=seen.append)
    plain = job.run("x")
    assert plain.output == traced.output and plain.generation.n_fast_forward > 0
    assert all(s.logits is not None for s in seen) and any(s.fast_forward for s in seen)
    assert all(kind != "rows" for kind, _ in job.model.calls[-3:])


# -- determinism, statistics -------------------------------------------------------


def test_same_seed_same_output():
    regex = r'\{"key":"[ab12]{1,6}", ?"ke":[12]{1,3}\}'
    for seed in range(4):
        p = SamplingParams(temperature=1.2, top_p=0.95, seed=seed)
        runs = [
            [s.token_id for s in generate(BatchModel(), PROMPT, matcher_for(regex), p, max_tokens=40)] for _ in range(2)
        ]
        assert runs[0] == runs[1]


def test_fast_forward_steps_in_the_statistics():
    regex = r'\{"key":"[ab]{1,3}"\}'
    steps = list(generate(BatchModel(), PROMPT, matcher_for(regex), WARM, max_tokens=30))
    stats = StepStats(WARM, VOCAB)
    recs = [stats.record(s) for s in steps]
    for s, r in zip(steps, recs):
        assert (r.tag == FAST_FORWARD) == s.fast_forward
        again = stats.compute(s.logits, s.mask)
        assert (r.legal_count, r.Z, r.kl, r.nucleus_masked) == (
            again.legal_count,
            again.Z,
            again.kl,
            again.nucleus_masked,
        )
        if r.tag == FAST_FORWARD:
            assert not r.collapsed
        if r.legal_count == 1:
            assert r.nucleus_masked == 1
    summary = summarize(recs)
    assert summary.fast_forward == sum(s.fast_forward for s in steps) >= 3
    assert summary.sampled + summary.fast_forward == summary.steps == len(steps)
    assert summary.to_record()["fast_forward"] == summary.fast_forward


@pytest.mark.parametrize("fast_forward", [True, False])
def test_trace_marks_fast_forwarded_steps(fast_forward):
    job = GenerationJob(
        BatchModel(),
        load_constraint(regex=r'\{"key":"[ab]{1,3}"\}'),
        WARM,
        max_tokens=30,
        chat=False,
        fast_forward=fast_forward,
    )
    buf = io.StringIO()
    tracer = TraceWriter(buf, job)
    res = tracer.run("a prompt", rid=1, seed=3)
    recs = [json.loads(line) for line in buf.getvalue().splitlines()]
    steps, summary = recs[1:-1], recs[-1]
    tags = [s["tag"] for s in steps]
    assert (FAST_FORWARD in tags) == fast_forward
    assert summary["fast_forward"] == tags.count(FAST_FORWARD) == res.generation.n_fast_forward
    assert summary["sampled"] == tags.count("forced") + tags.count("free") == summary["forced"] + summary["free"]
    assert summary["sampled"] + summary["fast_forward"] == summary["steps"] == len(steps)
    assert "".join(s["token"] for s in steps if not s.get("control")) == res.output
    table = render_text(step_table(tracer.records), width=100)
    panel = render_text(summary_panel(tracer.summary), width=100)
    assert ("» ff" in table) == fast_forward and ("fast-forwarded" in panel) == fast_forward


# -- random grammars ---------------------------------------------------------------

ALPHABET = b'{}":,abk'
literals = (
    st.binary(min_size=1, max_size=5)
    .map(lambda b: bytes(ALPHABET[x % len(ALPHABET)] for x in b))
    .map(lambda b: Literal(b.decode()))
)
classes = st.sampled_from([CharClass(((0x61, 0x62),)), CharClass(((0x31, 0x32),)), CharClass(((0x22, 0x22),))])


def exprs():
    return st.recursive(
        literals | classes,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=4).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2)).map(lambda t: Repeat(t[0], t[1], t[1] + t[2])),
        ),
        max_leaves=6,
    )


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs(), seed=st.integers(0, 50), extra=st.integers(0, 12), budget_aware=st.booleans())
def test_random_grammars_fast_forward_soundly(expr, seed, extra, budget_aware):
    grammar = Grammar({"root": expr})
    matcher = Matcher(compile_grammar(grammar, VOCAB, use_cache=False))
    least = matcher.min_tokens_to_complete()
    max_tokens = (least or 0) + extra
    if max_tokens == 0:
        max_tokens = 1
    m = BatchModel()
    dec = generate(
        m, PROMPT, matcher, SamplingParams(temperature=1.0, seed=seed), max_tokens=max_tokens, budget_aware=budget_aware
    )
    steps = list(dec)
    res = dec.result
    assert len(res.tokens) <= max_tokens
    assert accepts_prefix(grammar, res.output)
    if res.complete:
        assert accepts(grammar, res.output)
    if budget_aware and least is not None:
        assert res.complete
    fresh = Matcher(compile_grammar(grammar, VOCAB, use_cache=False))
    history = list(PROMPT)
    for s in steps:
        assert np.array_equal(s.logits, logits_after(history))
        remaining = max_tokens - s.index if (budget_aware and least is not None) else None
        assert np.array_equal(s.mask, fresh.mask(remaining)) and s.mask[s.token_id]
        if s.token_id == EOS:
            break
        fresh.advance(s.token_id)
        history.append(s.token_id)
