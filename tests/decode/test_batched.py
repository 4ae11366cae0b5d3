"""Batched decoding on the real model: many generations per model step (issue 28).

The oracles: `parallel=1` runs each sequence alone in the batch context, so it must give
exactly what the one-at-a-time Decoder gives (same rows, bit for bit); at `parallel` > 1
every output is checked against an independent oracle (`regex` fullmatch, `jsonschema`),
and a second run must repeat the first."""

from __future__ import annotations

import json

import jsonschema
import numpy as np
import pytest
import regex

from ministruct.decode.batched import BatchedDecoder, Request
from ministruct.decode.loop import Generation
from ministruct.decode.sampling import SamplingParams
from ministruct.errors import BudgetTooSmall, UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.job import GenerationJob

pytestmark = pytest.mark.model

SCHEMA = {
    "type": "object",
    "properties": {"name": {"type": "string", "maxLength": 12}, "age": {"type": "integer", "minimum": 0}},
    "required": ["name", "age"],
}
# the last three share one prompt: evaluated once, its KV cache copied (waiting in the same
# round, or from the store for a later slot)
PROMPTS = ["Describe a person.", "A code, please.", "A pirate, as JSON.", "Answer:", "Answer:", "Answer:"]


def _jobs(model):
    params = SamplingParams(temperature=0.8, top_p=0.95, seed=3)
    schema = GenerationJob(model, Constraint.from_json_schema(SCHEMA), params, max_tokens=40)
    digits = GenerationJob(model, Constraint.from_regex("[0-9]{2,5}-[a-z]{2}"), params, max_tokens=12)
    return schema, digits


def _requests(model):
    schema, digits = _jobs(model)
    for i, prompt in enumerate(PROMPTS):
        job = schema if i in (0, 2) else digits
        yield Request(job.decoder(prompt, seed=i), key=(i, job))


def _run(model, parallel: int) -> dict[int, tuple[Generation, object]]:
    batch = BatchedDecoder(model, parallel)
    try:
        return {req.key[0]: (out, req.key[1]) for req, out in batch.run(_requests(model))}
    finally:
        batch.close()


def _assert_valid(gen: Generation, job) -> None:
    assert gen.complete, gen
    if job.constraint.kind == "schema":
        jsonschema.validate(json.loads(gen.text), SCHEMA)
    else:
        assert regex.fullmatch("[0-9]{2,5}-[a-z]{2}", gen.text), gen.text


def test_a_sequence_alone_in_the_batch_context_gives_the_models_rows(model):
    prompt = model.encode_prompt("Write a haiku.", chat=True)
    model.prefill(prompt)
    alone = model.logits()
    model.eval([100])
    after = model.logits()
    with model.sequences(2) as seqs:
        first = seqs.decode([(0, prompt, 1)])[0]
        assert np.array_equal(first[-1], alone)
        seqs.copy(0, 1)  # a copied KV cache, not recomputed
        rows = seqs.decode([(0, [100], 1), (1, [100], 1)])
        assert np.array_equal(rows[0], rows[1])
        assert np.array_equal(rows[0][-1], after)
        assert seqs.n_past(1) == len(prompt) + 1


def test_parallel_one_is_the_one_at_a_time_decoder(model):
    batched = _run(model, 1)
    for i, prompt in enumerate(PROMPTS):
        job = _jobs(model)[0 if i in (0, 2) else 1]
        alone = job.decoder(prompt, seed=i).run()
        got = batched[i][0]
        assert (got.tokens, got.stop_reason, got.n_fast_forward) == (
            alone.tokens,
            alone.stop_reason,
            alone.n_fast_forward,
        )


def test_every_output_valid_and_a_second_run_repeats_the_first(model):
    first = _run(model, 3)
    assert sorted(first) == list(range(len(PROMPTS)))
    for gen, job in first.values():
        _assert_valid(gen, job)
    second = _run(model, 3)
    assert {i: g.tokens for i, (g, _) in first.items()} == {i: g.tokens for i, (g, _) in second.items()}


def test_steps_reach_on_step_and_add_up_to_the_generation(model):
    schema, _ = _jobs(model)
    seen: dict[int, list] = {0: [], 1: []}
    reqs = [Request(schema.decoder("Describe a person.", seed=k), on_step=seen[k].append, key=k) for k in (0, 1)]
    batch = BatchedDecoder(model, 2)
    try:
        outs = {req.key: gen for req, gen in batch.run(reqs)}
    finally:
        batch.close()
    for k, gen in outs.items():
        steps = seen[k]
        assert len(steps) == gen.n_steps and sum(s.fast_forward for s in steps) == gen.n_fast_forward > 0
        assert [s.token_id for s in steps if s.token] == gen.tokens
        assert b"".join(s.token for s in steps) == gen.output
        assert all(s.mask is None or s.mask[s.token_id] for s in steps)


def _rounds(monkeypatch) -> list[list[tuple[int, int]]]:
    """Every round handed to Sequences.decode: (sequence id, token count) per sequence."""
    from ministruct.decode.sequences import Sequences

    rounds: list[list[tuple[int, int]]] = []
    real = Sequences.decode

    def recording(self, work):
        rounds.append([(seq, len(tokens)) for seq, tokens, _ in work if tokens])
        return real(self, work)

    monkeypatch.setattr(Sequences, "decode", recording)
    return rounds


def _beside(model, monkeypatch, other: GenerationJob, prompt: str):
    """The schema job's "Describe a person." beside `other`'s prompt at parallel 2: the
    rounds, the schema generation's steps and both generations."""
    schema, _ = _jobs(model)
    rounds = _rounds(monkeypatch)
    steps: list = []
    reqs = [Request(schema.decoder("Describe a person.", seed=0), on_step=steps.append, key=0)]
    reqs.append(Request(other.decoder(prompt, seed=1), key=1))
    batch = BatchedDecoder(model, 2)
    try:
        outs = {r.key: g for r, g in batch.run(reqs)}
    finally:
        batch.close()
    _assert_valid(outs[0], schema)
    _assert_valid(outs[1], other)
    return rounds, steps, outs


def test_beside_other_lines_a_dictated_stretch_goes_one_token_per_round(model, monkeypatch):
    """llama.cpp splits a batch whose sequences bring unequal token counts into one pass
    per count: beside other lines each round brings one token per sequence, a dictated
    stretch's tokens taken one a round (still without a draw, as the tokenizer splits
    them); a generation left alone fast-forwards a stretch whole."""
    schema, digits = _jobs(model)
    rounds, steps, _ = _beside(model, monkeypatch, digits, "A code, please.")
    both = [i for i, r in enumerate(rounds) if len(r) == 2]
    assert len(both) > 4 and all(n == 1 for i in both[1:] for _, n in rounds[i])  # after the prompts' round
    assert sum(s.fast_forward for s in steps[: len(both)]) >= 2
    # the first stretch, before any draw, is the one-at-a-time Decoder's split of it
    lead = _leading_forwarded(steps)
    assert len(lead) >= 2 and lead == _leading_forwarded(schema.decoder("Describe a person.", seed=0).steps())

    short = GenerationJob(model, Constraint.from_regex("[0-9]{2,5}-[a-z]{2}"), SamplingParams(seed=3), max_tokens=6)
    rounds, steps, outs = _beside(model, monkeypatch, short, "Two digits, a dash and two letters:")
    last_both = max(i for i, r in enumerate(rounds) if len(r) == 2)
    assert any(len(r) == 1 and r[0][1] > 1 for r in rounds[last_both + 1 :])


def _leading_forwarded(steps) -> list[int]:
    """The fast-forwarded tokens before the first drawn one."""
    out: list[int] = []
    for s in steps:
        if not s.fast_forward:
            break
        out.append(s.token_id)
    return out


def test_live_generations_move_to_the_lowest_sequence_ids(model, monkeypatch):
    """llama.cpp evaluates a batch over the whole range of sequence ids it touches: when a
    generation ends, a later one moves down into its slot (its KV cache copied), and the
    outputs are still valid and repeat on a second run."""
    schema, digits = _jobs(model)
    held: list[list[int]] = []  # the live slots of every round
    real = BatchedDecoder._compact

    def compact(self, slots, seqs):
        real(self, slots, seqs)
        held.append([i for i, s in enumerate(slots) if s is not None])

    monkeypatch.setattr(BatchedDecoder, "_compact", compact)
    jobs = [digits, digits, schema, schema]  # the short ones end first, in the lowest slots
    prompts = ["A code, please.", "Another code.", "Describe a person.", "A pirate, as JSON."]

    def run() -> dict[int, Generation]:
        batch = BatchedDecoder(model, 4)
        try:
            reqs = [Request(j.decoder(p, seed=i), key=i) for i, (j, p) in enumerate(zip(jobs, prompts))]
            return {r.key: g for r, g in batch.run(reqs)}
        finally:
            batch.close()

    first = run()
    for i, gen in first.items():
        _assert_valid(gen, jobs[i])
    assert all(live == list(range(len(live))) for live in held)
    assert any(len(live) < 4 for live in held)
    assert {i: g.tokens for i, g in run().items()} == {i: g.tokens for i, g in first.items()}


def test_per_request_budgets_and_a_budget_too_small(model):
    schema, digits = _jobs(model)
    cut = GenerationJob(model, digits.constraint, digits.params, max_tokens=3, budget_aware=False)
    reqs = [
        Request(schema.decoder("Answer:"), key="ok"),
        Request(cut.decoder("Answer:"), key="cut"),
        Request(GenerationJob(model, schema.constraint, schema.params, max_tokens=2).decoder("Answer:"), key="small"),
    ]
    batch = BatchedDecoder(model, 3)
    try:
        outs = {req.key: out for req, out in batch.run(reqs)}
    finally:
        batch.close()
    assert isinstance(outs["small"], BudgetTooSmall)
    assert outs["ok"].complete
    assert outs["cut"].stop_reason == "max_tokens" and outs["cut"].n_tokens == 3


def test_parallel_must_be_a_positive_integer(model):
    with pytest.raises(UsageError, match="parallel"):
        BatchedDecoder(model, 0)


def test_run_many_keeps_input_order(model):
    _, digits = _jobs(model)
    prompts = ["Answer:", "A code:", "Answer:", "Code?", "Answer:"]
    results = list(digits.run_many(prompts, parallel=4, seeds=range(5)))
    assert [r.id for r in results] == [1, 2, 3, 4, 5] and [r.prompt for r in results] == prompts
    assert all(r.complete and regex.fullmatch("[0-9]{2,5}-[a-z]{2}", r.output) for r in results)
    assert [r.output for r in results] == [r.output for r in digits.run_many(prompts, parallel=4, seeds=range(5))]


def test_the_context_is_sized_to_what_the_requests_use_and_grows_for_a_longer_one(model):
    """Two short requests fill two sequences of 256 tokens (not `parallel` of n_ctx); a
    later request that needs more waits for them, and the context is made again for it.
    The outputs are those of a context fixed at the model's n_ctx (the size of the
    context does not change the rows)."""
    _, digits = _jobs(model)
    long = GenerationJob(model, digits.constraint, digits.params, max_tokens=400)

    def requests():
        yield Request(digits.decoder("Answer:", seed=1), key="a")
        yield Request(digits.decoder("A code:", seed=2), key="b")
        yield Request(long.decoder("Answer:", seed=3), key="long")

    sized = BatchedDecoder(model, 2)
    fixed = BatchedDecoder(model, 2, n_ctx=model.n_ctx)
    try:
        made = []
        outs = {}
        for req, gen in sized.run(requests()):
            outs[req.key] = gen
            made.append((sized._seqs.n_seq, sized._seqs.n_ctx))
        assert made[:2] == [(2, 256), (2, 256)] and made[-1] == (2, 512)
        assert sized._seqs.n_seq == 2
        want = {req.key: gen for req, gen in fixed.run(requests())}
        assert fixed._seqs.n_ctx == model.n_ctx and fixed._seqs.n_seq == 2
    finally:
        sized.close()
        fixed.close()
    assert {k: g.tokens for k, g in outs.items()} == {k: g.tokens for k, g in want.items()}
    for gen in outs.values():
        assert gen.complete and regex.fullmatch("[0-9]{2,5}-[a-z]{2}", gen.text)
    few = BatchedDecoder(model, 8)
    try:
        list(few.run([Request(digits.decoder("Answer:", seed=1))]))
        assert (few._seqs.n_seq, few._seqs.n_ctx) == (1, 256)  # one request: one sequence
    finally:
        few.close()


def _evaluated(monkeypatch) -> list[int]:
    """Every token count handed to Sequences.decode, one entry per sequence per round."""
    from ministruct.decode.sequences import Sequences

    seen: list[int] = []
    real = Sequences.decode

    def counting(self, work):
        seen.extend(len(tokens) for _, tokens, _ in work)
        return real(self, work)

    monkeypatch.setattr(Sequences, "decode", counting)
    return seen


@pytest.mark.parametrize("parallel", [1, 2, 4])
def test_prompts_that_begin_alike_evaluate_their_shared_beginning_once(model, monkeypatch, parallel):
    """Four records under one schema: the schema instruction comes first, so only the
    first prompt is evaluated whole; each other evaluates what follows the tokens it shares
    (with the store at parallel 1 and 2, with a prompt of the same round at 4). The
    outputs are the one-at-a-time Decoder's: a copied prefix gives the same rows."""
    schema, _ = _jobs(model)
    prompts = ["Describe a person.", "A pirate, as JSON.", "Describe a cat.", "Name and age of a baker."]
    ids = [tuple(schema.decoder(p).prompt_tokens) for p in prompts]
    least = min(_common_prefix(a, b) for a in ids for b in ids if a is not b)
    assert least > 50  # the chat template's beginning and the schema text
    seen = _evaluated(monkeypatch)
    batch = BatchedDecoder(model, parallel)
    try:
        outs = {
            req.key: gen
            for req, gen in batch.run(Request(schema.decoder(p, seed=i), key=i) for i, p in enumerate(prompts))
        }
    finally:
        batch.close()
    # each output token is evaluated at most once; each prompt after the first at most past `least`
    at_most = len(ids[0]) + sum(len(p) - least for p in ids[1:]) + sum(g.n_tokens for g in outs.values())
    assert sum(seen) <= at_most
    for i, p in enumerate(prompts):
        _assert_valid(outs[i], schema)
        if parallel == 1:
            assert outs[i].tokens == schema.decoder(p, seed=i).run().tokens


def test_a_repeated_prompt_that_waits_for_a_shared_beginning_joins_its_first_copy(model, monkeypatch):
    """Greedy, two prompts that begin alike, each given twice in one round: the second
    prompt's copies wait together for the first's shared beginning, evaluate the rest once
    and are one line, so every token is evaluated once and the copies agree."""
    job = GenerationJob(model, Constraint.from_json_schema(SCHEMA), SamplingParams(temperature=0), max_tokens=40)
    prompts = ["Describe a person.", "Describe a cat.", "Describe a person.", "Describe a cat."]
    ids = [tuple(job.decoder(p).prompt_tokens) for p in prompts]
    seen = _evaluated(monkeypatch)
    batch = BatchedDecoder(model, 4)
    try:
        outs = {req.key: gen for req, gen in batch.run(Request(job.decoder(p), key=i) for i, p in enumerate(prompts))}
    finally:
        batch.close()
    assert outs[0].tokens == outs[2].tokens and outs[1].tokens == outs[3].tokens
    shared = _common_prefix(ids[0], ids[1])
    assert sum(seen) <= len(ids[0]) + len(ids[1]) - shared + outs[0].n_tokens + outs[1].n_tokens
    for g in outs.values():
        _assert_valid(g, job)


def _common_prefix(a, b) -> int:
    n = 0
    while n < min(len(a), len(b)) and a[n] == b[n]:
        n += 1
    return n


def test_where_a_prefix_cannot_be_kept_each_prompt_is_evaluated_whole(model, monkeypatch):
    """A cache that cannot keep part of a sequence (a recurrent model, or a sliding window
    that dropped early positions) makes Sequences.copy(keep=...) fail: every prompt is then
    evaluated whole, and the outputs are the one-at-a-time Decoder's."""
    from ministruct.decode.sequences import Sequences

    real = Sequences.copy

    def no_partial(self, src, dst, keep=None):
        if keep is not None and keep < self.n_past(src):
            self.clear(dst)
            return False
        return real(self, src, dst)

    monkeypatch.setattr(Sequences, "copy", no_partial)
    schema, _ = _jobs(model)
    prompts = ["Describe a person.", "A pirate, as JSON.", "Describe a cat."]
    seen = _evaluated(monkeypatch)
    for parallel in (1, 3):
        seen.clear()
        batch = BatchedDecoder(model, parallel)
        try:
            outs = {
                r.key: g for r, g in batch.run(Request(schema.decoder(p, seed=i), key=i) for i, p in enumerate(prompts))
            }
        finally:
            batch.close()
        whole = sum(len(schema.decoder(p).prompt_tokens) for p in prompts)
        assert sum(seen) >= whole
        for i, p in enumerate(prompts):
            _assert_valid(outs[i], schema)
            if parallel == 1:
                assert outs[i].tokens == schema.decoder(p, seed=i).run().tokens


def test_without_dictated_rows_the_same_tokens(model):
    """forced_logits=False computes only the row each draw needs: the same batches, so the
    same tokens, and the fast-forwarded steps carry no row."""
    schema, _ = _jobs(model)
    prompts = ["Describe a person.", "A pirate, as JSON.", "Describe a cat."]
    got = {}
    for rows in (True, False):
        steps: dict[int, list] = {i: [] for i in range(len(prompts))}
        reqs = []
        for i, p in enumerate(prompts):
            dec = schema.decoder(p, seed=i)
            dec.forced_logits = rows
            reqs.append(Request(dec, on_step=steps[i].append, key=i))
        batch = BatchedDecoder(model, 3)
        try:
            got[rows] = {r.key: g.tokens for r, g in batch.run(reqs)}
        finally:
            batch.close()
        forwarded = [s for i in steps for s in steps[i] if s.fast_forward]
        assert forwarded and all((s.logits is not None) == rows for s in forwarded)
    assert got[True] == got[False]


def _samples(
    model, job, prompt: str, n: int, monkeypatch, parallel: int | None = None
) -> tuple[dict[int, Generation], dict[int, list], list[int]]:
    """`n` samples of one prompt (at parallel n unless given): outputs and steps by seed,
    and the token counts handed to Sequences.decode."""
    seen = _evaluated(monkeypatch)
    steps: dict[int, list] = {k: [] for k in range(n)}
    batch = BatchedDecoder(model, parallel or n)
    try:
        reqs = [Request(job.decoder(prompt, seed=k), on_step=steps[k].append, key=k) for k in range(n)]
        outs = {r.key: g for r, g in batch.run(reqs)}
    finally:
        batch.close()
    return outs, steps, seen


def test_greedy_samples_stay_on_one_line_and_evaluate_each_token_once(model, monkeypatch):
    """Samples of one prompt are one line while their draws agree: greedy ones always do,
    so the prompt and every output token are evaluated once, in one sequence of the
    batch (the others follow its cache), and each sample is the one-at-a-time Decoder's
    output, bit for bit."""
    job = GenerationJob(model, Constraint.from_json_schema(SCHEMA), SamplingParams(temperature=0), max_tokens=40)
    prompt = "Describe a person."
    alone = job.decoder(prompt).run()
    outs, _, seen = _samples(model, job, prompt, 6, monkeypatch)
    assert [outs[k].tokens for k in range(6)] == [alone.tokens] * 6
    assert sum(seen) <= len(job.decoder(prompt).prompt_tokens) + alone.n_tokens


@pytest.mark.parametrize(("copies", "parallel"), [("kept", 8), ("kept", 3), ("lost", 8)])
def test_samples_that_part_go_on_from_what_they_shared(model, monkeypatch, copies, parallel):
    """Sampled, they part: the one that leaves gets a copy of the cache they shared (or,
    where the copy fails, evaluates that again, in one batch); at parallel 3 a finished
    sample's sequence is taken by the next sample while others still follow it.

    The oracles: every row a sample drew from is the model's own row after that sample's
    tokens, fed one at a time (batched rows differ from it in the last bits: correlation
    above 0.998 here; a cache holding the wrong tokens gives 0.7-0.9). At parallel 8 with
    copies, each sample is the one-at-a-time Decoder's output, bit for bit, and each
    distinct beginning of the outputs was evaluated once: no more tokens than the prompt
    and the nodes of the outputs' token trie."""
    from ministruct.decode.sequences import Sequences

    if copies == "lost":
        real = Sequences.copy

        def only_whole(self, src, dst, keep=None):  # (the lines' copies all name `keep`)
            if keep is not None:
                self.clear(dst)
                return False
            return real(self, src, dst)

        monkeypatch.setattr(Sequences, "copy", only_whole)
    # compact: the walk this test was written on; in the default layout (spaced) one sample's
    # 15th token differs from the one-at-a-time Decoder's (a near tie the last bits decide)
    constraint = Constraint.from_json_schema(SCHEMA, whitespace="compact")
    job = GenerationJob(model, constraint, SamplingParams(temperature=0.9, top_p=1.0, seed=3), max_tokens=40)
    prompt = "Describe a person."
    outs, steps, seen = _samples(model, job, prompt, 8, monkeypatch, parallel)
    assert len({g.output for g in outs.values()}) > 1  # they parted
    ids = job.decoder(prompt).prompt_tokens
    if (copies, parallel) == ("kept", 8):
        trie = {tuple(g.tokens[:i]) for g in outs.values() for i in range(1, len(g.tokens) + 1)}
        assert sum(seen) <= len(ids) + len(trie)
    for k, gen in outs.items():
        _assert_valid(gen, job)
        if (copies, parallel) == ("kept", 8):
            assert gen.tokens == job.decoder(prompt, seed=k).run().tokens
        model.prefill(ids)
        for step in steps[k]:
            if step.logits is not None:
                assert np.corrcoef(step.logits, model.logits())[0, 1] > 0.99
            model.eval([step.token_id])
