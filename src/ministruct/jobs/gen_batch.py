"""`gen --input` as a library call: each record runs with its own settings, and a record
that cannot run becomes an error record in its place (the batch goes on).

    pool = JobPool(job, ConstraintCache(options))
    gen = GenBatch(pool, n=1, seed=0, emit=lambda res, extra: write_record(res.to_record()))
    status = run_batch(validated(records), gen, per_record=1)
"""

from __future__ import annotations

import copy
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable, Iterator, Protocol

from ministruct.decode.batched import BatchedDecoder, Request
from ministruct.decode.loop import Decoder, Generation, Step
from ministruct.errors import MinistructError, OutputClosed, OutputError
from ministruct.jobs.batch import ConstraintCache, record_constraint
from ministruct.jobs.job import GenerationJob, GenResult
from ministruct.jobs.ordered import InOrder
from ministruct.jobs.records import InputRecord
from ministruct.jobs.think import ThinkSettings

SAMPLING_FIELDS = ("temperature", "top_p")


class Traced(Protocol):
    """One generation being traced (diagnostics.trace.TracedRun)."""

    decoder: Decoder

    def on_step(self, step: Step) -> Any: ...
    def finish(self, gen: Generation) -> GenResult: ...
    def write(self) -> None: ...


class Tracer(Protocol):
    """What a batch needs of a trace writer (diagnostics.trace.TraceWriter): runs a job
    and writes its steps, or starts a generation whose lines it keeps until `write`."""

    job: GenerationJob

    def run(self, prompt: str, *, rid: Any, seed: int) -> GenResult: ...
    def start(self, prompt: str, *, rid: Any, seed: int, job: GenerationJob, kept: bool) -> Traced: ...


class JobPool:
    """GenerationJobs for records: the command's job with a record's constraint, think and
    sampling settings. Each constraint is compiled once per think setting, whatever else varies.

    `think_preset`: what a record's `"think": true` turns on when the command did not."""

    def __init__(
        self, base: GenerationJob, cache: ConstraintCache, *, think_preset: ThinkSettings | None = None
    ) -> None:
        self.base = base
        self.cache = cache
        self.think_preset = getattr(base, "think", None) or think_preset or ThinkSettings()
        self._by_constraint: dict[tuple, GenerationJob] = {}
        self._thinks: dict[ThinkSettings, ThinkSettings] = {}

    def job_for(self, settings: dict[str, Any]) -> GenerationJob:
        """The job a record with these (validated) settings runs with; MinistructError when
        its constraint cannot be loaded or compiled."""
        job = self.base
        own = record_constraint(settings)
        think = self._think_of(settings)
        if own is not None or think is not getattr(job, "think", None):
            c = self.cache.get(*own) if own is not None else job.constraint
            job = self._by_constraint.get((id(c), think)) or self._add(c, think)
        if job.constraint is not None:
            job.compiled  # compile now, so the variants below share it  # noqa: B018
        varied = {k: settings[k] for k in SAMPLING_FIELDS if k in settings}
        if not varied and "max_tokens" not in settings and "system" not in settings:
            return job
        job = copy.copy(job)
        if varied:
            job.params = replace(job.params, **varied)
        if "max_tokens" in settings:
            job.max_tokens = settings["max_tokens"]
        if "system" in settings:
            job.system = settings["system"]
        return job

    def _think_of(self, settings: dict[str, Any]) -> ThinkSettings | None:
        """The think settings of a record (the command's unless it says `think` or `think_tokens`)."""
        think = getattr(self.base, "think", None)
        if settings.get("think") is False:
            return None
        if settings.get("think") or "think_tokens" in settings:
            think = think or self.think_preset
            if "think_tokens" in settings and settings["think_tokens"] != think.think_tokens:
                think = self._variant(think.with_tokens(settings["think_tokens"]))
        return think

    def _variant(self, think: ThinkSettings) -> ThinkSettings:
        """One object per distinct think setting (jobs are keyed by it)."""
        return self._thinks.setdefault(think, think)

    def _add(self, constraint: Any, think: ThinkSettings | None) -> GenerationJob:
        job = copy.copy(self.base)
        job.constraint = constraint
        job.think = think
        job._compiled = None
        job._full = None
        self._by_constraint[(id(constraint), think)] = job
        return job

    def persist(self) -> None:
        """Save every compiled grammar's learned masks (GenerationJob.persist)."""
        self.base.persist()
        for job in self._by_constraint.values():
            job.persist()


def status_of(res: GenResult) -> str:
    """ok, incomplete (cut off, no error) or failed (an error record, no legal continuation,
    an output that the full schema rejects where the grammar left keywords out: lenient)."""
    if res.error is not None or (res.schema_check is not None and res.schema_check.get("valid") is False):
        return "failed"
    return "ok" if res.complete else "incomplete"


@dataclass(eq=False)
class _Pending:
    """A record whose results are not all finished: they are emitted together, in order."""

    rec: InputRecord
    place: int
    open: int  # results not finished yet
    results: dict[int, GenResult] = field(default_factory=dict)
    traces: dict[int, Traced] = field(default_factory=dict)  # with a tracer: written with the results


class GenBatch:
    """The per-record step of `run_batch` for gen: `n` results per record (seeds seed,
    seed+1, ...; a record's `seed` replaces the command's), each passed to `emit(result,
    extra_fields)`. With `parallel` > 1 `many` runs up to that many generations at once
    (decode/batched.py) and emits in input order (with a tracer, each generation's trace
    lines are written with its result, in the same order)."""

    def __init__(
        self,
        pool: JobPool,
        *,
        n: int,
        seed: int,
        emit: Callable[[GenResult, dict], None],
        tracer: Tracer | None = None,
        parallel: int = 1,
    ) -> None:
        self.pool, self.n, self.seed, self.emit, self.tracer = pool, n, seed, emit, tracer
        self.parallel = parallel

    def many(self, todo: Iterable[tuple[InputRecord, int]]) -> Iterator[tuple[InputRecord, list[str]]]:
        """`run_batch`'s loop for parallel runs: (record, results already written) in, each
        record's statuses out in input order, its results emitted as soon as it is next
        in line (an error record at once, in its place)."""
        order: InOrder[_Pending] = InOrder()
        out: list[tuple[InputRecord, list[str]]] = []

        def release() -> None:
            for q in order.ready():
                for j in sorted(q.results):
                    if j in q.traces:
                        q.traces[j].write()
                    self.emit(q.results[j], q.rec.extra)
                out.append((q.rec, [status_of(q.results[j]) for j in sorted(q.results)]))

        def finish(p: _Pending, k: int, res: GenResult) -> None:
            p.results[k] = res
            p.open -= 1
            if p.open == 0:
                order.put(p.place, p)
                release()

        def finish_nothing(p: _Pending) -> None:
            p.open = 0
            order.put(p.place, p)
            release()

        def requests() -> Iterator[Request]:
            for rec, done in todo:
                error, job = self._refusal(rec) if done < self.n else (None, None)
                p = _Pending(rec, order.add(), 1)
                if error is not None and not done:  # one error record, as __call__ writes
                    finish(p, 0, GenResult.failed(rec.id, rec.value, error))
                    continue
                if job is None:  # nothing left to write for it (--resume)
                    finish_nothing(p)
                    continue
                p.open = self.n - done
                seed = rec.settings.get("seed", self.seed)
                for k in range(done, self.n):
                    try:
                        if self.tracer is not None:
                            traced = self.tracer.start(rec.value, rid=rec.id, seed=seed + k, job=job, kept=True)
                            yield Request(traced.decoder, on_step=traced.on_step, key=(p, k, job, None, traced))
                            continue
                        dec, monitor, on_step, scorer = job.watched_decoder(rec.value, seed=seed + k)
                    except MinistructError as e:
                        finish(p, k, GenResult.failed(rec.id, rec.value, f"{rec.where}: {e}"))
                        continue
                    yield Request(dec, on_step=on_step, key=(p, k, job, (monitor, scorer), None))

        batch = BatchedDecoder(self.pool.base.model, self.parallel)
        try:
            for req, outcome in batch.run(requests()):
                p, k, job, watched, traced = req.key
                if isinstance(outcome, MinistructError):
                    res = GenResult.failed(p.rec.id, p.rec.value, f"{p.rec.where}: {outcome}")
                elif traced is not None:
                    res = traced.finish(outcome)
                    p.traces[k] = traced
                else:
                    res = job.result_of(outcome, p.rec.id, p.rec.value, *watched)
                finish(p, k, res)
                yield from out
                out.clear()
            yield from out
        finally:
            batch.close()

    def _refusal(self, rec: InputRecord) -> tuple[str | None, GenerationJob | None]:
        """(why the record cannot run, None) or (None, the job it runs with)."""
        if rec.error is not None:
            return rec.error, None
        if rec.value is not None and not rec.value.strip():
            return f"{rec.where}: the prompt is empty", None
        try:
            return None, self.pool.job_for(rec.settings)
        except MinistructError as e:
            return f"{rec.where}: {e}", None

    def __call__(self, rec: InputRecord, done: int) -> Iterator[str]:
        error, job = self._refusal(rec)
        if error is not None:
            yield from self._failed(rec, error, done)
            return
        seed = rec.settings.get("seed", self.seed)
        for k in range(done, self.n):
            try:
                res = self.run_one(job, rec, seed + k)
            except (OutputError, OutputClosed):  # the batch's output, not this record, failed
                raise
            except MinistructError as e:
                res = GenResult.failed(rec.id, rec.value, f"{rec.where}: {e}")
            self.emit(res, rec.extra)
            yield status_of(res)

    def _failed(self, rec: InputRecord, error: str, done: int) -> Iterator[str]:
        """One error record for a record that cannot run (none when --resume found one)."""
        if done:
            return
        res = GenResult.failed(rec.id, rec.value, error)
        self.emit(res, rec.extra)
        yield status_of(res)

    def run_one(self, job: GenerationJob, rec: InputRecord, seed: int) -> GenResult:
        """One generation for a record (through the tracer when tracing); errors propagate."""
        assert rec.value is not None
        if self.tracer is None:
            return job.run(rec.value, rid=rec.id, seed=seed)
        self.tracer.job = job
        return self.tracer.run(rec.value, rid=rec.id, seed=seed)
