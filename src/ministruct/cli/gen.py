"""`ministruct gen`: constrained generation; output text on stdout, or one JSONL record per result."""

from __future__ import annotations

import sys
from typing import Annotated, Optional

import typer

from ..constraints import read_text
from ..errors import UsageError
from ..model import Model
from ..pipeline import GenerationJob, GenResult
from ..records import InputRecord, read_records, write_record
from . import options as o
from .base import app, warn
from .progress import Progress


@app.command()
@o.constraint_flags
@o.run_flags(max_tokens=256)
def gen(
    prompt: Annotated[Optional[str], typer.Argument(help="The prompt (or use --input).")] = None,
    *,
    constraint: o.ConstraintFlags,
    run: o.RunFlags,
    n: Annotated[int, typer.Option("--n", min=1, help="Samples per prompt (seeds seed, seed+1, ...).")] = 1,
    input: Annotated[Optional[str], typer.Option("--input", help="JSONL records with 'prompt' (and 'id'), or plain lines; '-' for stdin.")] = None,
    format: Annotated[Optional[str], typer.Option("--format", help="text, json or jsonl (jsonl is the default with --input).")] = None,
    trace: Annotated[Optional[str], typer.Option("--trace", help="Write per-step JSONL records to this file.")] = None,
    trace_legal: Annotated[bool, typer.Option("--trace-legal", help="Add each step's legal token ids to the trace.")] = False,
    hard_cut: o.HardCut = False,
    quiet: o.Quiet = False,
    no_progress: o.NoProgress = False,
    server: Annotated[Optional[list[str]], typer.Option("--server", help="An OpenAI-compatible server URL to run on instead of the local model (repeat; env MINISTRUCT_SERVERS); every output is checked.", rich_help_panel="Server fleet")] = None,
    server_kind: Annotated[Optional[str], typer.Option("--server-kind", help="llama, vllm or openai: the servers' constraint dialect (default: detected where a server says).", rich_help_panel="Server fleet")] = None,
    concurrency: Annotated[int, typer.Option("--concurrency", min=1, help="Requests in flight per server.", rich_help_panel="Server fleet")] = 1,
    retry_unverified: Annotated[int, typer.Option("--retry-unverified", min=0, help="Resend an output that fails our check up to N times.", rich_help_panel="Server fleet")] = 0,
) -> None:
    """Generate text that satisfies the constraint. The output alone goes to stdout."""
    if (prompt is None) == (input is None):
        raise UsageError("give either a PROMPT argument or --input FILE")
    fmt = format or ("jsonl" if input is not None else "text")
    if fmt not in ("text", "json", "jsonl"):
        raise UsageError(f"--format must be text, json or jsonl, got {fmt!r}")
    if trace_legal and trace is None:
        raise UsageError("--trace-legal needs --trace FILE")
    c = constraint.load()
    for w in c.warnings:
        warn(w)
    from .gen_fleet import gen_on_fleet, servers_requested

    if servers_requested(server):
        raise typer.Exit(gen_on_fleet(
            server, c, run, _records(prompt, input), n=n, fmt=fmt, trace=trace, trace_legal=trace_legal,
            server_kind=server_kind, concurrency=concurrency, retry_unverified=retry_unverified,
        ))
    if server_kind is not None or concurrency != 1 or retry_unverified:
        raise UsageError("--server-kind, --concurrency and --retry-unverified need --server URL")
    records = _records(prompt, input)
    llm = Model.load(run.model)
    job = GenerationJob(
        llm, c, run.params, max_tokens=run.max_tokens, chat=run.chat, system=run.system,
        show_schema=run.show_schema, budget_aware=not hard_cut,
    )
    tracer = None
    if trace is not None:
        from ..diagnostics.trace import TraceWriter

        tracer = TraceWriter.open(trace, job, legal=trace_legal)
    status = 0
    progress = Progress(enabled=not no_progress, total=None if input is not None else n, label="generating")
    try:
        with progress:
            for rec in records:
                if rec.error is not None:
                    _emit(GenResult.failed(rec.id, "", rec.error), fmt)
                    status = 2
                    continue
                for k in range(n):
                    res = _run_one(job, rec, run.params.seed + k, tracer)
                    _emit(res, fmt)
                    if not quiet:
                        label = f"record {res.id}: " if input is not None or n > 1 else ""
                        for w in res.warnings:
                            warn(label + w)
                    if res.error is not None and res.stop_reason == "error":
                        status = 2
                    elif not res.complete:
                        status = max(status, 1)
                    progress.advance()
    finally:
        if tracer is not None:
            tracer.close()
        job.persist()
    raise typer.Exit(status)


def _records(prompt: str | None, input: str | None):
    if prompt is not None:
        return [InputRecord(1, 1, prompt)]
    if input == "-":
        return read_records(sys.stdin, "prompt", "<stdin>")
    text, source = read_text(input, "input")
    return read_records(text.splitlines(keepends=True), "prompt", source)


def _run_one(job: GenerationJob, rec: InputRecord, seed: int, tracer) -> GenResult:
    if tracer is None:
        return job.run(rec.value, rid=rec.id, seed=seed)
    return tracer.run(rec.value, rid=rec.id, seed=seed)


def _emit(res: GenResult, fmt: str) -> None:
    if fmt == "text":
        if res.stop_reason == "error":
            print(f"ministruct: error: {res.error}", file=sys.stderr)
            return
        sys.stdout.write(res.output + "\n")
        sys.stdout.flush()
    else:
        write_record(res.to_record())
