"""`gen --trace FILE`: per-step JSONL records (cli.md, "Records").

For each generation the file gets a `header` record, one `step` record per drawn
token, and a `summary` record; a file holding several generations (`--n`, `--input`)
repeats that group, and every record carries `gen` (0-based position in the file)
so the groups can be told apart without counting. Every record has `"v": 1`.

    tracer = TraceWriter.open("trace.jsonl", job, legal=True)
    result = tracer.run("Pick a year:", rid=1, seed=0)
    tracer.close()
"""

from __future__ import annotations

import math
from contextlib import contextmanager
from dataclasses import replace
from typing import IO, TYPE_CHECKING, Any, Callable, Iterator

import numpy as np

from ministruct.diagnostics.stats import FREE, StepRecord, StepStats, Summary, summarize
from ministruct.engine.think import boundaries_for
from ministruct.errors import InputError, UsageError
from ministruct.jobs.records import dumps_record, output_error

if TYPE_CHECKING:
    from ministruct.decode.loop import Decoder, Generation, Step
    from ministruct.jobs.job import GenerationJob, GenResult


class TraceWriter:
    """Runs generations for a GenerationJob and records every step.

    `stream` may be None (records are kept in memory only: `header`, `records`,
    `summary` of the last run), which is how `inspect` uses it.
    """

    def __init__(
        self, stream: IO[str] | None, job: "GenerationJob", *, legal: bool = False, path: str | None = None
    ) -> None:
        self.stream = stream
        self.job = job
        self.legal = legal
        self.path = path
        self.count = 0  # generations written
        self.header: dict = {}
        self.records: list[StepRecord] = []
        self.summary: Summary | None = None
        self._owned = False

    @classmethod
    def open(cls, path: str, job: "GenerationJob", *, legal: bool = False) -> "TraceWriter":
        """A writer to a new file at `path` (InputError when it cannot be created)."""
        if path == "-":
            raise UsageError("trace needs a file path (stdout carries the output)", parameter="trace")
        try:
            stream = open(path, "w", encoding="utf-8")
        except OSError as e:
            raise InputError(f"{path}: cannot write the trace file: {e.strerror or e}") from None
        writer = cls(stream, job, legal=legal, path=path)
        writer._owned = True
        return writer

    def _write(self, obj: dict) -> None:
        if self.stream is not None:
            with self._named_errors():
                self.stream.write(dumps_record(obj) + "\n")

    @contextmanager
    def _named_errors(self) -> Iterator[None]:
        """A failed write (a full disk) is an OutputError naming the trace file."""
        try:
            yield
        except OSError as e:
            stream, self.stream = self.stream, None
            if self._owned and stream is not None:
                try:
                    stream.close()
                except OSError:
                    pass
            raise output_error(e, self.path or "<trace>", " the trace file") from None

    def header_record(
        self, prompt: str, rid: Any, prompt_ids: list[int], seed: int | None, job: "GenerationJob | None" = None
    ) -> dict:
        """The header object of one generation (without "v"), for `job` (default this writer's)."""
        job = job or self.job
        params = job.params if seed is None else replace(job.params, seed=seed)
        vocab = job.model.vocabulary
        c = job.constraint
        return {
            "type": "header",
            "gen": self.count,
            "id": rid,
            "model": job.model.name,
            "model_path": str(job.model.path),
            "n_vocab": vocab.n_tokens,
            "n_logits": vocab.n_logits,
            "prompt": prompt,
            "prompt_token_ids": list(prompt_ids),
            "sampling": params.to_dict(),
            "max_tokens": job.max_tokens,
            "constraint": c.describe() if c is not None else None,
            **({"think": _think_header(job)} if job.think is not None else {}),
        }

    def start(
        self,
        prompt: str,
        *,
        rid: Any = 1,
        seed: int | None = None,
        job: "GenerationJob | None" = None,
        kept: bool = False,
    ) -> "TracedRun":
        """One generation to trace, not yet run (its `decoder`; feed its steps to `on_step`,
        then `finish`). Its lines are written as they come, or with `kept` held until
        `write()` (generations that finish out of order are written in order)."""
        job = job or self.job
        dec = job.decoder(prompt, seed=seed)
        return TracedRun(self, job, dec, self.header_record(prompt, rid, dec.prompt_tokens, seed, job), kept=kept)

    def run(
        self,
        prompt: str,
        *,
        rid: Any = 1,
        seed: int | None = None,
        on_record: Callable[[StepRecord], None] | None = None,
    ) -> "GenResult":
        """Generate for one prompt, writing its header, steps and summary; the result record."""
        traced = self.start(prompt, rid=rid, seed=seed)
        self.header, self.records = traced.header, traced.records
        for step in traced.decoder.steps():
            rec = traced.on_step(step)
            if on_record is not None:
                on_record(rec)
        result = traced.finish(traced.decoder.result)
        self.summary = traced.summary
        return result

    def step_record(self, rec: StepRecord, step: "Step") -> dict:
        obj = {"type": "step", "gen": self.count, **rec.to_record()}
        if step.budget_limited:
            obj["budget_limited"] = True
        if self.legal:
            obj["legal"] = legal_ids(step) if step.mask is not None else None
        return obj

    def _flush(self) -> None:
        if self.stream is not None:
            with self._named_errors():
                self.stream.flush()

    def close(self) -> None:
        """Close the file (if this writer opened it)."""
        if self.stream is not None:
            with self._named_errors():
                self.stream.flush()
                if self._owned:
                    self.stream.close()
            self.stream = None


class TracedRun:
    """One generation being traced: its Decoder, step records and trace lines (see
    TraceWriter.start). Nothing is written before its first step, so a generation that
    cannot start leaves no lines."""

    def __init__(self, writer: TraceWriter, job: "GenerationJob", decoder: "Decoder", header: dict, *, kept: bool):
        self.writer, self.job, self.decoder, self.header = writer, job, decoder, header
        if hasattr(decoder, "trace_weights"):  # particles: each step's line gets every particle's weight
            decoder.trace_weights = True
        compiled = job.compiled
        self.stats = StepStats(decoder.params, job.model.vocabulary, boundaries_for(compiled) if compiled else None)
        self.monitor = job.fight_monitor()
        self.scorer = job.tool_scorer()
        self.records: list[StepRecord] = []
        self.summary: Summary | None = None
        self._kept = kept
        self._lines: list[dict] = []

    def _line(self, obj: dict) -> None:
        if not self._kept and not self._lines:  # the header goes first, with the first line after it
            self._lines.append(self.header)
            self._out(self.header)
        if self._kept:
            self._lines.append(obj)
        else:
            self._out(obj)

    def _out(self, obj: dict) -> None:
        obj["gen"] = self.writer.count
        self.writer._write(obj)

    def on_step(self, step: "Step") -> StepRecord:
        """Record one step (its trace line, the fight monitor, the tool scorer); its StepRecord."""
        if self.scorer is not None:
            self.scorer.observe(step)
        rec = self.stats.record(step)
        if step.mask is not None and rec.phase != "think":  # the record's Z, as monitor.observe(step) would
            self.monitor.add(rec.Z, rec.tag != FREE)
        self.records.append(rec)
        line = self.writer.step_record(rec, step)
        weights = getattr(self.decoder, "particle_weights", None)
        if weights is not None and step.index < len(weights):
            line["particle_log_weights"] = [w if math.isfinite(w) else None for w in weights[step.index]]
        self._line(line)
        return rec

    def finish(self, gen: "Generation") -> "GenResult":
        """The generation's result record, and its summary line (written, unless kept)."""
        result = self.job.result_of(gen, self.header["id"], self.header["prompt"], self.monitor, self.scorer)
        self.summary = summarize(self.records)
        self._line(
            {
                "type": "summary",
                "gen": self.writer.count,
                "id": self.header["id"],
                **self.summary.to_record(),
                **(
                    {"reasoning": result.reasoning, "think_end": result.think_end}
                    if result.reasoning is not None
                    else {}
                ),
                "output": result.output,
                "complete": result.complete,
                "stop_reason": result.stop_reason,
                "n_tokens": result.n_tokens,
                "budget_limited": result.budget_limited,
                "warnings": list(result.warnings),
                "decode_s": round(gen.decode_s, 4),
                **({"tool_calls": result.tool_calls, "tool_scores": result.tool_scores} if result.has_tools else {}),
            }
        )
        if not self._kept:
            self._done()
        return result

    def write(self) -> None:
        """Write the kept lines (header, steps, summary) as the writer's next generation."""
        if self._kept:
            self._kept = False
            for obj in [self.header, *self._lines]:
                self._out(obj)
            self._lines = []
            self._done()

    def _done(self) -> None:
        self.writer._flush()
        self.writer.count += 1


def _think_header(job: "GenerationJob") -> dict:
    t = job.think
    full = job.full_constraint
    close = full.boundary.close if full is not None and full.boundary is not None else t.close
    return {
        "open": t.open,
        "close": t.close,
        "close_is_token": not isinstance(close, str),
        "think_tokens": t.think_tokens,
        "announced": t.announce,
    }


def legal_ids(step: "Step") -> list[int]:
    """The legal ids of a step, ascending (for --trace-legal)."""
    return np.flatnonzero(step.mask).tolist()
