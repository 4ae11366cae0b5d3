"""`ministruct gen`: constrained generation; output text on stdout, or one JSONL record per result."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ministruct.cli.base import app, warn
from ministruct.cli.constraint_options import ConstraintFlags, constraint_flags
from ministruct.cli.gen_options import (
    Ess,
    FleetFlags,
    GenFlags,
    HardCut,
    NoEndWeight,
    NoFastForward,
    Parallel,
    Particles,
    fleet_flags,
)
from ministruct.cli.options import AllowExtraFields, NoProgress, Quiet, ResumeFile, RunFlags, run_flags
from ministruct.cli.progress import Progress
from ministruct.cli.think_options import ThinkFlags, think_flags
from ministruct.decode.defaults import DEFAULT_PARALLEL
from ministruct.errors import UsageError
from ministruct.jobs.records import InputRecord, count_lines, open_lines, read_records, write_line, write_record

if TYPE_CHECKING:  # the library loads when the command runs, not for --help
    from ministruct.decode.model import ModelLoading
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.batch import ConstraintCache
    from ministruct.jobs.gen_batch import GenBatch
    from ministruct.jobs.job import GenResult


@app.command()
@constraint_flags
@run_flags(max_tokens=256)
@think_flags
@fleet_flags
def gen(
    prompt: Annotated[Optional[str], typer.Argument(help="The prompt (or use --input).")] = None,
    *,
    constraint: ConstraintFlags,
    run: RunFlags,
    think: ThinkFlags,
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per prompt (seeds seed, seed+1, ...).")] = 1,
    input: Annotated[
        Optional[str],
        typer.Option("--input", help="JSONL records with 'prompt' (and 'id'), or plain lines; '-' for stdin."),
    ] = None,
    format: Annotated[
        Optional[str], typer.Option("--format", help="text, json or jsonl (jsonl is the default with --input).")
    ] = None,
    trace: Annotated[Optional[str], typer.Option("--trace", help="Write per-step JSONL records to this file.")] = None,
    trace_legal: Annotated[
        bool, typer.Option("--trace-legal", help="Add each step's legal token ids to the trace.")
    ] = False,
    hard_cut: HardCut = False,
    no_fast_forward: NoFastForward = False,
    particles: Particles = None,
    ess: Ess = 0.5,
    no_end_weight: NoEndWeight = False,
    parallel: Parallel = None,
    quiet: Quiet = False,
    verbose: Annotated[
        bool,
        typer.Option(
            "--verbose", help="Say on stderr what was read from the chat template (tool-call family, think tags)."
        ),
    ] = False,
    no_progress: NoProgress = False,
    allow_extra_fields: AllowExtraFields = False,
    resume: ResumeFile = None,
    fleet: FleetFlags,
) -> None:
    """Generate text that satisfies the constraint. The output alone goes to stdout."""
    g = GenFlags(
        prompt,
        input,
        n,
        format,
        trace,
        trace_legal,
        allow_extra_fields,
        resume,
        hard_cut=hard_cut,
        no_fast_forward=no_fast_forward,
        quiet=quiet,
        no_progress=no_progress,
        parallel=parallel,
    )
    g.check()
    constraint.refuse_stdin_twice(input)
    run = _with_particles(run, particles, ess, no_end_weight, parallel, fleet.requested())
    if fleet.requested():
        c = constraint.load()
        for w in c.warnings:
            warn(w)
        if parallel is not None:
            raise UsageError("--parallel decodes on the local model; with --server use --concurrency")
        from ministruct.cli.gen_fleet import gen_on_fleet  # a local run need not import the fleet client

        raise typer.Exit(gen_on_fleet(fleet, c, run, g, _record_constraints(constraint), think))
    from ministruct.decode.model import Model

    constraint = constraint.with_model(run.model)
    # the weights load while the constraint is built
    loading = Model.load_in_background(run.model, **run.load_options())
    try:
        c = constraint.load()
        fleet.refuse_without_server()
        status = _gen_local(g, c, constraint, run, think, loading, verbose)
    except BaseException:
        loading.wait()  # nothing may be written while the load keeps stdout and stderr quiet
        raise
    raise typer.Exit(status)


def _say_template(c: Constraint, settings, template: str | None) -> None:
    """--verbose: the tool-call family and think tags in use, and where they came from."""
    from ministruct.grammar.tool_families import think_opens_in_prompt

    if c.tools is not None:
        print(f"ministruct: tool format: {c.tools.detected or c.tools.format.name + ' (given)'}", file=sys.stderr)
    if settings is not None:
        how = "announced in the prompt" if settings.announce else "the model's own"
        if not settings.announce and think_opens_in_prompt(template, settings.open):
            how += "; the template's prompt opens it"
        print(f"ministruct: think: {settings.open!r} ... {settings.close!r} ({how})", file=sys.stderr)


def _with_particles(
    run: RunFlags, particles: int | None, ess: float, no_end_weight: bool, parallel: int | None, fleet: bool
) -> RunFlags:
    """`run` with the particle settings in its SamplingParams (checked there: UsageError)."""
    from dataclasses import replace

    if particles is None:
        if ess != 0.5 or no_end_weight:
            raise UsageError("--ess and --no-end-weight apply to --particles N")
        return run
    if fleet:
        raise UsageError("--particles needs the local model: servers do not expose their KV caches to copy")
    if parallel is not None:
        raise UsageError("--particles runs one generation's particles as one batch; --parallel does not apply")
    params = replace(run.params, particles=particles, ess=ess, end_weight=not no_end_weight)
    return replace(run, params=params)


def _gen_local(
    g: GenFlags,
    c: Constraint,
    constraint: ConstraintFlags,
    run: RunFlags,
    think: ThinkFlags,
    loading: ModelLoading,
    verbose: bool = False,
) -> int:
    """The prompt or the --input records on the local model; the exit status."""
    from ministruct.jobs.batch import GEN_SETTINGS, Resume, run_batch, stderr_report, validated
    from ministruct.jobs.gen_batch import GenBatch, JobPool

    resumed = Resume.load(g.resume) if g.input is not None else None
    llm = constraint.apply_template(loading.result())
    for w in c.warnings:
        warn(w)
    settings = think.settings(llm)
    if verbose:
        _say_template(c, settings, llm.chat_template)
    job = run.job(llm, c, budget_aware=not g.hard_cut, fast_forward=not g.no_fast_forward, think=settings)
    tracer = None
    if g.trace is not None:
        from ministruct.diagnostics.trace import TraceWriter

        tracer = TraceWriter.open(g.trace, job, legal=g.trace_legal)
    pool = JobPool(
        job,
        _record_constraints(constraint),
        think_preset=settings or ThinkFlags(True, None, None, None, None).settings(llm),
    )
    label = g.input is not None or g.n > 1
    batch = GenBatch(
        pool,
        n=g.n,
        seed=run.params.seed,
        emit=lambda res, extra: _emit(res, g.fmt, extra, g.quiet, label),
        tracer=tracer,
        parallel=1 if run.params.particles is not None else DEFAULT_PARALLEL if g.parallel is None else g.parallel,
    )
    try:
        if g.input is None:
            return _single(batch, g.prompt, g.n, g.no_progress)
        with open_lines(g.input) as (lines, source):
            progress = Progress(enabled=not g.no_progress, total=count_lines(g.input), label="generating")
            records = read_records(lines, "prompt", source, settings=GEN_SETTINGS, allow_extra=g.allow_extra)
            with progress:
                return run_batch(
                    validated(records), batch, resume=resumed, per_record=g.n, progress=progress, report=stderr_report
                )
    finally:
        if tracer is not None:
            tracer.close()
        pool.persist()


def _single(batch: GenBatch, prompt: str, n: int, no_progress: bool) -> int:
    """The PROMPT argument: n samples; an error (a prompt too long...) is bad usage, exit 2."""
    from ministruct.jobs.gen_batch import status_of

    job, status = batch.pool.base, 0
    seeds = [batch.seed + k for k in range(n)]
    if batch.parallel > 1 and n > 1 and batch.tracer is not None:  # the samples and their traces, in order
        job.decoder(prompt, seed=seeds[0]).start()  # bad usage (a prompt too long, a budget too small): exit 2
        for _, statuses in batch.many([(InputRecord(1, 1, prompt), 0)]):
            status = int(any(s != "ok" for s in statuses))
        return status
    if batch.parallel > 1 and n > 1:
        results = job.run_many([prompt] * n, parallel=batch.parallel, seeds=seeds)
    else:
        results = (batch.run_one(job, InputRecord(1, 1, prompt), seed) for seed in seeds)
    with Progress(enabled=not no_progress, total=n, label="generating", unit="samples") as progress:
        for res in results:
            res.id = 1
            batch.emit(res, {})
            if status_of(res) != "ok":
                status = 1
            progress.advance()
    return status


def _record_constraints(flags: ConstraintFlags) -> ConstraintCache[Constraint]:
    """What records' own constraints load to: the command's constraint options, the record's constraint."""
    from ministruct.jobs.batch import ConstraintCache, with_constraint

    return ConstraintCache(lambda kind, value: with_constraint(flags, kind, value).load(), on_load=_warn_once)


def _warn_once(c) -> None:
    for w in c.warnings:
        warn(w)


def _emit(res: GenResult, fmt: str, extra: dict, quiet: bool, label: bool) -> None:
    """Write one result (text or a record with the extra fields after its own), then its warnings."""
    _write(res, fmt, extra)
    if not quiet:
        for w in res.warnings:
            warn((f"record {res.id}: " if label else "") + w)


def _write(res: GenResult, fmt: str, extra: dict) -> None:
    if fmt == "text":
        if res.stop_reason is None and res.error is not None:
            print(f"ministruct: error: {res.error}", file=sys.stderr)
            return
        write_line(res.output)
    else:
        rec = res.to_record()
        for k, v in extra.items():
            rec.setdefault(k, v)
        write_record(rec)
