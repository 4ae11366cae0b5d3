"""gen batches without the model: each record's settings reach its job, one compile per
constraint, error records in place (and not repeated by --resume)."""

from __future__ import annotations

from typing import Any

import pytest

from ministruct.decode.sampling import SamplingParams
from ministruct.errors import MinistructError
from ministruct.jobs.batch import GEN_SETTINGS, ConstraintCache, Resume, run_batch, validated
from ministruct.jobs.gen_batch import GenBatch, JobPool, status_of
from ministruct.jobs.job import GenResult
from ministruct.jobs.records import read_records


class StubJob:
    """What JobPool and GenBatch use of a GenerationJob: attributes, `compiled`, `run`, `persist`."""

    compiles = 0

    def __init__(self, constraint: Any = "command") -> None:
        self.constraint = constraint
        self.params = SamplingParams(temperature=0.7, top_p=0.9, seed=0)
        self.max_tokens = 16
        self.system = None
        self._compiled = None
        self.persisted = 0

    @property
    def compiled(self):
        if self._compiled is None:
            StubJob.compiles += 1
            self._compiled = f"compiled {self.constraint}"
        return self._compiled

    def run(self, prompt: str, *, rid: Any, seed: int) -> GenResult:
        if prompt == "too long":
            raise MinistructError("prompt (3000 tokens) + max_tokens 16 exceed the context size n_ctx=2048")
        out = f"{self.constraint}|{self.params.temperature}|{self.params.top_p}|{self.max_tokens}|{self.system}|{seed}"
        return GenResult(rid, prompt, out, True, "eos", 1)

    def persist(self) -> None:
        self.persisted += 1


def _run(lines: list[str], n: int = 1, resume: Resume | None = None) -> tuple[int, list[GenResult], JobPool]:
    StubJob.compiles = 0
    pool = JobPool(StubJob(), ConstraintCache(lambda kind, value: f"{kind}:{value}"))
    out: list[GenResult] = []
    batch = GenBatch(pool, n=n, seed=5, emit=lambda res, extra: out.append(res))
    records = validated(read_records([x.encode() + b"\n" for x in lines], "prompt", "in", settings=GEN_SETTINGS))
    return run_batch(records, batch, per_record=n, resume=resume), out, pool


def test_each_record_runs_with_its_own_settings_and_one_compile_per_constraint():
    status, out, pool = _run(
        [
            "plain",
            '{"prompt": "a", "regex": "[0-9]", "seed": 9, "temperature": 0, "top_p": 0.5, "max_tokens": 3, "system": "S"}',
            '{"prompt": "b", "regex": "[0-9]"}',
            '{"prompt": "c", "regex": "[0-9]", "max_tokens": 4}',
            '{"prompt": "d"}',
        ]
    )
    assert status == 0
    assert [r.output for r in out] == [
        "command|0.7|0.9|16|None|5",
        "regex:[0-9]|0|0.5|3|S|9",
        "regex:[0-9]|0.7|0.9|16|None|5",
        "regex:[0-9]|0.7|0.9|4|None|5",
        "command|0.7|0.9|16|None|5",
    ]
    assert StubJob.compiles == 2  # the command's constraint and [0-9], whatever the other settings
    pool.persist()
    assert pool.base.persisted == 1 and all(j.persisted == 1 for j in pool._by_constraint.values())


def test_bad_records_become_error_records_in_place():
    status, out, _ = _run(["ok", '{"prompt": "   "}', "too long", '{"prompt": "x", "seed": -2}', "ok"])
    assert status == 1
    assert [status_of(r) for r in out] == ["ok", "failed", "failed", "failed", "ok"]
    assert out[1].error == "in:2: the prompt is empty" and out[1].stop_reason is None
    assert out[2].error.startswith("in:3: prompt (3000 tokens)") and out[2].prompt == "too long"
    assert out[3].error == 'in:4: "seed" must be an integer >= 0, not -2'


def test_n_samples_count_seeds_from_the_records_seed():
    _, out, _ = _run(['{"prompt": "a", "seed": 10}', "b"], n=2)
    assert [r.output.rsplit("|", 1)[1] for r in out] == ["10", "11", "5", "6"]


def test_resume_does_not_repeat_error_records():
    resume = Resume()
    resume.done.update({"2": 1, "1": 1})
    _, out, _ = _run(["a", '{"broken'], n=2, resume=resume)
    assert [(r.id, r.output.rsplit("|", 1)[1] if r.error is None else "error") for r in out] == [(1, "6")]


@pytest.mark.parametrize("settings", [{"schema": "/no/such.json"}, {"regex": "(", "seed": 1}])
def test_a_record_whose_constraint_fails_is_an_error_record(settings):
    pool = JobPool(
        StubJob(), ConstraintCache(lambda kind, value: (_ for _ in ()).throw(MinistructError(f"{value}: bad")))
    )
    with pytest.raises(MinistructError, match="bad"):
        pool.job_for(settings)
