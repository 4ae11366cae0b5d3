"""TraceWriter: the header / step / summary records of cli.md on a small fake model."""

from __future__ import annotations

import io
import json
import math
from pathlib import Path

import numpy as np
import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.stats import StepStats, summarize
from ministruct.diagnostics.trace import TraceWriter
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import InputError, UsageError
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.job import GenerationJob

STEP_FIELDS = {
    "step",
    "token_id",
    "token",
    "legal_count",
    "Z",
    "kl",
    "tag",
    "nucleus_raw",
    "nucleus_masked",
    "collapsed",
    "nucleus_changed",
    "top_changed",
    "mask_us",
}
TOKENS = [b"", b"a", b"b", b"ab", b"c", b" ", b"\xe2", b"\x82\xac", b"", b"1"]


class FakeModel:
    """Logits are a pure function of the evaluated tokens (so a trace can be re-derived)."""

    name = "fake"
    path = Path("/nonexistent/fake.gguf")
    n_ctx = 512

    def __init__(self) -> None:
        self.vocabulary = Vocabulary.from_bytes(
            TOKENS, eog_ids=[0], control_ids=[8], control_text={0: "</s>", 8: "<pad>"}, n_logits=12, name="fake"
        )
        self.tokens: list[int] = []

    def format_prompt(self, text: str, *, chat: bool, system: str | None = None) -> str:
        return text

    def tokenize(self, text: str, *, add_bos: bool, special: bool) -> list[int]:
        return [9] * max(1, len(text) // 4)

    def encode_prompt(self, prompt: str, *, chat: bool, system: str | None = None) -> list[int]:
        return self.tokenize(self.format_prompt(prompt, chat=chat, system=system), add_bos=True, special=chat)

    def prefill(self, ids) -> int:
        self.tokens = list(ids)
        return 0

    def eval(self, ids) -> None:
        self.tokens.extend(ids)

    def logits(self) -> np.ndarray:
        return logits_after(self.tokens)


def logits_after(tokens: list[int]) -> np.ndarray:
    rng = np.random.default_rng([len(tokens), *tokens[-3:]])
    return (rng.standard_normal(12) * 3).astype(np.float32)


@pytest.fixture(autouse=True)
def _cache(tmp_path, monkeypatch):
    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path / "cache"))


def make_job(regex: str = "[ab]{2,8}", **params) -> GenerationJob:
    c = load_constraint(regex=regex)
    p = SamplingParams(**{"temperature": 1.0, "top_p": 0.9, "seed": 0, **params})
    return GenerationJob(FakeModel(), c, p, max_tokens=12, chat=False)


def run_trace(job: GenerationJob, *, legal: bool, seeds=(0,)) -> tuple[list[dict], list]:
    buf = io.StringIO()
    tracer = TraceWriter(buf, job, legal=legal)
    results = [tracer.run("a prompt here", rid=f"r{s}", seed=s) for s in seeds]
    tracer.close()
    return [json.loads(line) for line in buf.getvalue().splitlines()], results


def test_records_follow_the_contract():
    recs, (res,) = run_trace(make_job(), legal=False)
    assert all(r["v"] == 1 for r in recs)
    types = [r["type"] for r in recs]
    assert types[0] == "header" and types[-1] == "summary"
    assert set(types[1:-1]) == {"step"}
    h = recs[0]
    assert {"model", "n_vocab", "n_logits", "prompt_token_ids", "sampling", "constraint"} <= set(h)
    assert (h["model"], h["n_vocab"], h["n_logits"]) == ("fake", len(TOKENS), 12)
    assert h["prompt_token_ids"] == [9, 9, 9]
    assert h["sampling"] == {"temperature": 1.0, "top_p": 0.9, "top_k": 0, "repeat_penalty": 1.0, "seed": 0}
    assert h["constraint"]["kind"] == "regex" and h["constraint"]["text"] == "[ab]{2,8}"
    steps = recs[1:-1]
    assert [s["step"] for s in steps] == list(range(len(steps)))
    for s in steps:
        assert STEP_FIELDS <= set(s) and "legal" not in s
        assert s["tag"] in ("forced", "free") and 0 < s["Z"] <= 1
        assert s["kl"] == pytest.approx(-math.log(s["Z"]), abs=1e-12)
    out = "".join(s["token"] for s in steps if not s.get("control"))
    assert out == res.output == recs[-1]["output"]
    assert recs[-1]["stop_reason"] == res.stop_reason and recs[-1]["complete"] == res.complete


def test_steps_recompute_from_the_same_logits_and_legal_ids():
    job = make_job("[ab]{3,8} c")
    recs, (res,) = run_trace(job, legal=True, seeds=(3,))
    header, steps = recs[0], [r for r in recs if r["type"] == "step"]
    assert res.complete and steps[-1]["token"] == "c" and steps[-1]["tag"] == "forced"
    assert steps[-1]["legal"] == [4] and steps[-1]["nucleus_masked"] == 1
    matcher = Matcher(compile_grammar(job.constraint.grammar, job.model.vocabulary))
    history = list(header["prompt_token_ids"])
    stats = StepStats(SamplingParams(temperature=1.0, top_p=0.9))
    for s in steps:
        mask = np.asarray(matcher.mask())
        assert s["legal"] == np.flatnonzero(mask).tolist()
        assert s["token_id"] in s["legal"]
        again = stats.compute(logits_after(history), mask).to_record()
        for key in STEP_FIELDS - {"step", "token_id", "token", "mask_us"}:  # the statistics
            assert s[key] == again[key], key
        if s["token_id"] == 0:
            assert s["control"] is True and s["token"] == "</s>"
            break
        matcher.advance(s["token_id"])
        history.append(s["token_id"])


def test_summary_is_the_summary_of_the_steps():
    recs, _ = run_trace(make_job(), legal=False, seeds=(5,))
    steps = [r for r in recs if r["type"] == "step"]
    summary = recs[-1]
    assert summary["steps"] == len(steps)
    assert summary["forced"] == sum(s["tag"] == "forced" for s in steps)
    assert summary["free"] == sum(s["tag"] == "free" for s in steps)
    assert summary["collapsed"] == sum(s["collapsed"] for s in steps)
    assert summary["total_kl"] == pytest.approx(sum(s["kl"] for s in steps))
    assert summary["min_Z"] == min(s["Z"] for s in steps)
    assert steps[summary["min_Z_step"]]["Z"] == summary["min_Z"]


def test_several_generations_repeat_the_group():
    recs, results = run_trace(make_job(), legal=True, seeds=(0, 1, 2))
    headers = [r for r in recs if r["type"] == "header"]
    summaries = [r for r in recs if r["type"] == "summary"]
    assert [h["gen"] for h in headers] == [0, 1, 2] == [s["gen"] for s in summaries]
    assert [h["sampling"]["seed"] for h in headers] == [0, 1, 2]
    assert [h["id"] for h in headers] == ["r0", "r1", "r2"]
    gen = -1
    for r in recs:  # every step sits between its header and its summary
        if r["type"] == "header":
            gen = r["gen"]
        assert r["gen"] == gen
    assert [s["output"] for s in summaries] == [r.output for r in results]


def test_in_memory_records_match_the_file():
    job = make_job()
    tracer = TraceWriter(None, job)
    res = tracer.run("a prompt here", seed=4)
    assert len(tracer.records) == tracer.summary.steps
    assert tracer.summary == summarize(tracer.records)
    assert tracer.header["prompt_token_ids"] == [9, 9, 9]
    assert res.generation is not None


def test_traced_run_is_the_same_generation_as_plain():
    job = make_job()
    plain = job.run("a prompt here", seed=7)
    traced = TraceWriter(None, make_job()).run("a prompt here", seed=7)
    assert (plain.output, plain.stop_reason, plain.n_tokens) == (traced.output, traced.stop_reason, traced.n_tokens)


def test_open_and_close(tmp_path):
    path = tmp_path / "t.jsonl"
    tracer = TraceWriter.open(str(path), make_job(), legal=False)
    tracer.run("a prompt here")
    tracer.close()
    lines = path.read_text().splitlines()
    assert json.loads(lines[0])["type"] == "header" and json.loads(lines[-1])["type"] == "summary"
    with pytest.raises(InputError, match="cannot write"):
        TraceWriter.open(str(tmp_path / "missing" / "t.jsonl"), make_job())
    with pytest.raises(UsageError):
        TraceWriter.open("-", make_job())


@pytest.mark.model
def test_the_batched_loop_at_one_traces_what_the_serial_loop_traces(model, tmp_path):
    """GenBatch.many (the batched decoder, one sequence at a time) writes the trace the
    one-at-a-time path writes, number for number (timings aside), in input order, with a
    budget too small for one record (an error record, no trace lines) between the others."""
    from ministruct.jobs.batch import GEN_SETTINGS, ConstraintCache, run_batch, validated
    from ministruct.jobs.gen_batch import GenBatch, JobPool
    from ministruct.jobs.records import read_records

    lines = [f'{{"id": "r{i}", "prompt": "Word {i}:", "max_tokens": {(4 + i % 5) if i != 3 else 1}}}' for i in range(7)]
    job = GenerationJob(model, load_constraint(regex="[a-z]{2,9}"), SamplingParams(seed=4), chat=False)

    def trace(batched: bool) -> tuple[list[list[dict]], list]:
        path = tmp_path / f"trace{batched}.jsonl"
        tracer = TraceWriter.open(str(path), job)
        results: list = []
        batch = GenBatch(
            JobPool(job, ConstraintCache(lambda k, v: None)),
            n=1,
            seed=4,
            emit=lambda res, extra: results.append(res),
            tracer=tracer,
        )
        records = validated(read_records([x.encode() + b"\n" for x in lines], "prompt", "in", settings=GEN_SETTINGS))
        if batched:  # BatchedDecoder with one slot: bit for bit the one-at-a-time decoder
            list(batch.many((rec, 0) for rec in records))
        else:
            run_batch(records, batch, per_record=1)
        tracer.close()
        groups: list[list[dict]] = []
        for rec in map(json.loads, path.read_text().splitlines()):
            if rec["type"] == "header":
                groups.append([])
            groups[-1].append({k: v for k, v in rec.items() if k not in ("mask_us", "decode_s", "mask_us_mean")})
        return groups, results

    serial, serial_results = trace(False)
    assert [r.id for r in serial_results] == [f"r{i}" for i in range(7)] and serial_results[3].error is not None
    assert [g[0]["id"] for g in serial] == [f"r{i}" for i in range(7) if i != 3]
    assert [g[0]["gen"] for g in serial] == list(range(6))
    many_groups, many_results = trace(True)
    assert many_groups == serial
    assert [r.to_record() for r in many_results] == [r.to_record() for r in serial_results]
