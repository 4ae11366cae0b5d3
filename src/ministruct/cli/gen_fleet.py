"""`ministruct gen --server URL`: the batch on a fleet of servers (the library is ministruct.fleet).

This module maps flags to the library's parameters (cli/errors.py maps the parameters
that errors name back to flags), writes result records as they come back in input
order, and words the one-line notice for a server that ignored the constraint.
"""

from __future__ import annotations

import os
import sys
from typing import IO, Iterable

from ministruct.cli.base import warn
from ministruct.cli.options import RunFlags
from ministruct.constraints import Constraint
from ministruct.errors import UsageError
from ministruct.fleet import KINDS, FleetBatch, FleetResult, Ignored, Settings, connect, split_servers
from ministruct.records import InputRecord, write_record

ENV_SERVERS = "MINISTRUCT_SERVERS"
ENV_API_KEY = "MINISTRUCT_API_KEY"
TRACE_TOP_LOGPROBS = 10


def servers_requested(flags: list[str] | None) -> bool:
    """Whether gen runs on servers: --server given, or MINISTRUCT_SERVERS set to something."""
    return bool(flags) or bool(os.environ.get(ENV_SERVERS, "").strip())


def gen_on_fleet(
    server: list[str] | None,
    constraint: Constraint,
    run: RunFlags,
    records: Iterable[InputRecord],
    *,
    n: int,
    fmt: str,
    trace: str | None,
    trace_legal: bool,
    server_kind: str | None,
    concurrency: int,
    retry_unverified: int,
) -> int:
    """Run the records on the servers; return the exit status (0 all verified, 1 any record
    not: unverified, failed, or a bad input record, reported in its place as a local batch does)."""
    urls = split_servers(server or os.environ.get(ENV_SERVERS, ""))
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
    )
    key = os.environ.get(ENV_API_KEY)
    headers = {"Authorization": f"Bearer {key}"} if key else None
    servers = connect(urls, constraint, settings, kind=server_kind, headers=headers, warn=warn)
    batch = FleetBatch(
        servers,
        constraint,
        settings,
        concurrency=concurrency,
        retry_unverified=retry_unverified,
        headers=headers,
        on_ignored=lambda e: _say_ignored(e, constraint),
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
                write_record(rec, trace_out)

    try:
        return batch.run(records, emit, n=n)
    finally:
        if trace_out is not None:
            trace_out.close()


def _say_ignored(event: Ignored, constraint: Constraint) -> None:
    """The one line for a server whose output shows it ignored the constraint."""
    kind = event.server.kind
    others = [k for k in KINDS if k != kind and (k != "openai" or constraint.kind == "schema")]
    warn(
        f"server {event.server.url} returned unconstrained text (record {event.record_id}: {event.reason}): "
        f"the server ignored the constraint: kind {kind} sends field {event.field}; "
        f"try --server-kind {' or '.join(others)}"
    )
