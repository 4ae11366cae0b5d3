"""`ministruct gen --server URL`: the batch on a fleet of servers (the library is ministruct.fleet).

This module maps flags to the library's parameters (cli/errors.py maps the parameters
that errors name back to flags), writes result records as they come back in input
order, and words the one-line notice for a server that ignored the constraint.
"""

from __future__ import annotations

import os
import sys
from contextlib import contextmanager
from typing import IO, Iterable, Iterator

from ministruct.cli.base import warn
from ministruct.cli.gen_options import ENV_SERVERS, FleetFlags, GenFlags
from ministruct.cli.options import RunFlags
from ministruct.cli.think_options import ThinkFlags
from ministruct.errors import UsageError
from ministruct.fleet import KINDS, FleetBatch, FleetResult, Ignored, Settings, connect, split_servers
from ministruct.grammar.constraint import Constraint
from ministruct.jobs.batch import GEN_SETTINGS, ConstraintCache, Resume, stderr_report, validated
from ministruct.jobs.records import (
    InputRecord,
    dumps_record,
    open_lines,
    output_error,
    read_records,
    write_line,
    write_record,
)
from ministruct.jobs.think import ThinkSettings, think_on_servers

ENV_API_KEY = "MINISTRUCT_API_KEY"
TRACE_TOP_LOGPROBS = 10
TRACE_FILE = " the trace file"  # what output errors call it


def gen_on_fleet(
    fleet: FleetFlags,
    constraint: Constraint,
    run: RunFlags,
    g: GenFlags,
    constraints: ConstraintCache[Constraint],
    think: ThinkFlags | None = None,
) -> int:
    """Run the prompt or the --input records on the servers; return the exit status (0 all
    verified, 1 any record not: unverified, failed, or a bad input record, reported in its
    place as a local batch does; 130/143 after SIGINT/SIGTERM, as a local batch). `constraints`
    loads the records' own constraints."""
    settings = think.settings() if think is not None else None
    if settings is not None:
        constraint = think_on_servers(constraint, settings)
        own = constraints
        constraints = ConstraintCache(lambda kind, value: think_on_servers(own.get(kind, value), settings))
    resumed = Resume.load(g.resume) if g.input is not None else None
    with _fleet_records(g.prompt, g.input, g.allow_extra) as records:
        return _run_on_fleet(fleet, constraint, run, records, g, constraints, resumed, think=settings)


@contextmanager
def _fleet_records(prompt: str | None, input: str | None, allow_extra: bool) -> Iterator[Iterable[InputRecord]]:
    """The records for --server: read as for the local model (a record's own constraint
    and settings go with it to the servers)."""
    if prompt is not None:
        yield [InputRecord(1, 1, prompt)]
        return
    with open_lines(input) as (lines, source):
        yield validated(read_records(lines, "prompt", source, settings=GEN_SETTINGS, allow_extra=allow_extra))


def _run_on_fleet(
    fleet: FleetFlags,
    constraint: Constraint,
    run: RunFlags,
    records: Iterable[InputRecord],
    g: GenFlags,
    constraints: ConstraintCache[Constraint],
    resume: Resume | None,
    *,
    think: ThinkSettings | None = None,
) -> int:
    n, fmt, trace, trace_legal = g.n, g.fmt, g.trace, g.trace_legal
    urls = split_servers(fleet.server or os.environ.get(ENV_SERVERS, ""))
    if not urls:
        raise UsageError(f"{ENV_SERVERS} names no server URL")
    if trace_legal:
        raise UsageError("--trace-legal needs the model's vocabulary, which a server does not share")
    settings = Settings(
        run.params,
        run.max_tokens,
        run.chat,
        run.system,
        run.show_schema,
        top_logprobs=TRACE_TOP_LOGPROBS if trace is not None else None,
        model=run.model,
        think=think,
    )
    key = os.environ.get(ENV_API_KEY)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    servers = connect(urls, constraint, settings, kind=fleet.server_kind, headers=headers, warn=warn)
    batch = FleetBatch(
        servers,
        constraint,
        settings,
        concurrency=fleet.concurrency,
        retry_unverified=fleet.retry_unverified,
        timeout=fleet.timeout,
        headers=headers,
        on_ignored=lambda e: _say_ignored(e, constraint),
        warn=warn,
        constraints=constraints,
    )
    trace_out: IO[str] | None = None
    if trace is not None:
        try:
            trace_out = open(trace, "w", encoding="utf-8")
        except OSError as e:
            raise UsageError(f"{trace}: cannot write the trace file: {e.strerror or e}") from None

    def emit(res: FleetResult) -> None:
        if fmt == "text":
            if res.result.stop_reason is None and res.result.error is not None:  # an error record
                print(f"ministruct: error: {res.result.error}", file=sys.stderr)
            else:
                sys.stdout.write(res.result.output + "\n")
                sys.stdout.flush()
        else:
            write_record(res.to_record())
        if trace_out is not None and res.trace:
            for rec in res.trace:
                write_line(dumps_record(rec), trace_out, trace, TRACE_FILE)

    try:
        return batch.run(records, emit, n=n, resume=resume, report=stderr_report)
    finally:
        if trace_out is not None:
            try:
                trace_out.close()
            except OSError as e:
                raise output_error(e, trace, TRACE_FILE) from None  # type: ignore[arg-type]


def _say_ignored(event: Ignored, constraint: Constraint) -> None:
    """The one line for a server whose output shows it ignored the constraint."""
    kind = event.server.kind
    others = [k for k in KINDS if k != kind and (k != "openai" or constraint.kind == "schema")]
    warn(
        f"server {event.server.url} returned unconstrained text (record {event.record_id}: {event.reason}): "
        f"the server ignored the constraint: kind {kind} sends field {event.field}; "
        f"try --server-kind {' or '.join(others)}; no more records go to it"
    )
