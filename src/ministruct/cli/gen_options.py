"""The flags of `gen` alone: how it decodes (--parallel, --particles, --hard-cut, ...),
GenFlags (what it was asked for besides the constraint and the model), and the server
fleet flags (--server and its companions: FleetFlags, `fleet_flags`)."""

from __future__ import annotations

import os
from dataclasses import dataclass
from typing import Annotated, Optional

import typer

from ministruct.cli.options import with_flags
from ministruct.decode.defaults import DEFAULT_PARALLEL
from ministruct.errors import UsageError

HardCut = Annotated[
    bool,
    typer.Option(
        "--hard-cut",
        help="Cut plainly at --max-tokens (no budget-aware closing).",
        rich_help_panel="Model and sampling",
    ),
]
Parallel = Annotated[
    Optional[int],
    typer.Option(
        "--parallel",
        min=1,
        help=(
            f"Decode up to N generations at once, one model step for all of them (default {DEFAULT_PARALLEL}). "
            "Rows computed in a batch differ in the last bits from rows computed alone, so a token can "
            "differ from --parallel 1; the same N and seed give the same outputs (and traces, written in "
            "input order)."
        ),
    ),
]
Particles = Annotated[
    Optional[int],
    typer.Option(
        "--particles",
        help=(
            "Sample what the model would write given a valid answer (not the masked sampler's renormalized "
            "steps) with N particles, and report p_valid (docs/sampling.md). A small language (choices, "
            "enums, bounded regexes) is enumerated exactly. 1: today's draws, weighed."
        ),
        rich_help_panel="Model and sampling",
    ),
]
Ess = Annotated[
    float,
    typer.Option(
        "--ess",
        help="With --particles: resample when the effective sample size falls below this share of N, in (0, 1].",
        rich_help_panel="Model and sampling",
    ),
]
NoEndWeight = Annotated[
    bool,
    typer.Option(
        "--no-end-weight",
        help=(
            "With --particles: an end the grammar dictates does not weigh the model's end-of-generation "
            "probability (the evaluation harnesses' reading of an option's likelihood)."
        ),
        rich_help_panel="Model and sampling",
    ),
]
NoFastForward = Annotated[
    bool,
    typer.Option(
        "--no-fast-forward",
        help="Evaluate stretches the grammar dictates token by token (one sampled step each) instead of in one batch.",
        rich_help_panel="Model and sampling",
    ),
]


@dataclass
class GenFlags:
    """What `gen` was asked for besides the constraint, the model and the servers:
    checked once (`check`), then read by the local run and the fleet run alike."""

    prompt: str | None
    input: str | None
    n: int
    format: str | None
    trace: str | None
    trace_legal: bool
    allow_extra: bool
    resume: str | None
    hard_cut: bool = False
    no_fast_forward: bool = False
    quiet: bool = False
    no_progress: bool = False
    parallel: int | None = None  # None: the default (decode/batched.DEFAULT_PARALLEL)

    @property
    def fmt(self) -> str:
        """The output format: the one given, else jsonl with --input and text without."""
        return self.format or ("jsonl" if self.input is not None else "text")

    def check(self) -> None:
        if (self.prompt is None) == (self.input is None):
            raise UsageError("give either a PROMPT argument or --input FILE")
        if self.fmt not in ("text", "json", "jsonl"):
            raise UsageError(f"--format must be text, json or jsonl, got {self.fmt!r}")
        if self.trace_legal and self.trace is None:
            raise UsageError("--trace-legal needs --trace FILE")
        if self.input is None and (self.resume is not None or self.allow_extra):
            raise UsageError("--resume and --allow-extra-fields apply to --input")


ENV_SERVERS = "MINISTRUCT_SERVERS"

Server = Annotated[
    Optional[list[str]],
    typer.Option(
        "--server",
        help="An OpenAI-compatible server URL to run on instead of the local model "
        "(repeat; env MINISTRUCT_SERVERS); every output is checked.",
        rich_help_panel="Server fleet",
    ),
]
ServerKind = Annotated[
    Optional[str],
    typer.Option(
        "--server-kind",
        help="llama, vllm or openai: the servers' constraint dialect (default: detected where a server says).",
        rich_help_panel="Server fleet",
    ),
]
Concurrency = Annotated[
    int, typer.Option("--concurrency", min=1, help="Requests in flight per server.", rich_help_panel="Server fleet")
]
RetryUnverified = Annotated[
    int,
    typer.Option(
        "--retry-unverified",
        min=0,
        help="Resend an output that fails our check up to N times.",
        rich_help_panel="Server fleet",
    ),
]

RequestTimeout = Annotated[
    float,
    typer.Option(
        "--timeout",
        min=0.001,
        metavar="SECONDS",
        help="Give a server this long to answer one request, then send the record elsewhere.",
        rich_help_panel="Server fleet",
    ),
]
DEFAULT_REQUEST_TIMEOUT = 300.0


@dataclass
class FleetFlags:
    """The server fleet flags as given."""

    server: list[str] | None
    server_kind: str | None
    concurrency: int
    retry_unverified: int
    timeout: float = DEFAULT_REQUEST_TIMEOUT

    def requested(self) -> bool:
        """Whether gen runs on servers: --server given, or MINISTRUCT_SERVERS set to something."""
        return bool(self.server) or bool(os.environ.get(ENV_SERVERS, "").strip())

    def refuse_without_server(self) -> None:
        if (
            self.server_kind is not None
            or self.concurrency != 1
            or self.retry_unverified
            or self.timeout != DEFAULT_REQUEST_TIMEOUT
        ):
            raise UsageError("--server-kind, --concurrency, --retry-unverified and --timeout need --server URL")


_FLEET_PARAMS = (
    ("server", Server, None),
    ("server_kind", ServerKind, None),
    ("concurrency", Concurrency, 1),
    ("retry_unverified", RetryUnverified, 0),
    ("timeout", RequestTimeout, DEFAULT_REQUEST_TIMEOUT),
)


def fleet_flags(fn):
    """Give a command the server fleet flags; it receives `fleet: FleetFlags`."""
    return with_flags(fn, "fleet", _FLEET_PARAMS, lambda d: FleetFlags(**d))
