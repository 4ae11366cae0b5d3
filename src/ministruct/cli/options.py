"""Flags several commands share: the model and sampling group (RunFlags, `run_flags`), the
single flags (--quiet, --no-progress, --allow-extra-fields, --resume), and `with_flags`, which
gives a command a group of flags as one dataclass. The other groups: constraint_options.py,
think_options.py, gen_options.py (cli.md is the contract for the flags' names)."""

from __future__ import annotations

import functools
import inspect as _inspect
import typing
from dataclasses import dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

if TYPE_CHECKING:  # the library loads when a command runs, not for its flags (--help)
    from ministruct.decode.model import Model as LoadedModel
    from ministruct.decode.sampling import SamplingParams
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.job import GenerationJob

Model = Annotated[
    Optional[str],
    typer.Option(
        "--model",
        help="GGUF model file (default: env MINISTRUCT_MODEL, else the bundled SmolLM2-135M).",
        rich_help_panel="Model and sampling",
    ),
]
Threads = Annotated[
    Optional[int],
    typer.Option(
        "--threads",
        min=1,
        help=(
            "llama.cpp threads (default: half the cores, as llama-cpp-python's). More threads than "
            "the cores other processes leave free run several times slower, not faster."
        ),
        rich_help_panel="Model and sampling",
    ),
]
MaxTokens = Annotated[
    int, typer.Option("--max-tokens", min=1, help="Stop after this many tokens.", rich_help_panel="Model and sampling")
]
Temperature = Annotated[float, typer.Option("--temperature", help="0 is greedy.", rich_help_panel="Model and sampling")]
TopP = Annotated[float, typer.Option("--top-p", help="Nucleus mass in (0, 1].", rich_help_panel="Model and sampling")]
TopK = Annotated[
    int, typer.Option("--top-k", help="Keep the K most probable tokens (0: off).", rich_help_panel="Model and sampling")
]
RepeatPenalty = Annotated[
    float, typer.Option("--repeat-penalty", help="1.0 is off.", rich_help_panel="Model and sampling")
]
Seed = Annotated[
    int, typer.Option("--seed", help="Random seed (deterministic per seed).", rich_help_panel="Model and sampling")
]
Chat = Annotated[
    bool,
    typer.Option(
        "--chat/--raw",
        help="Apply the model's chat template, or send the prompt as is.",
        rich_help_panel="Model and sampling",
    ),
]
System = Annotated[
    Optional[str], typer.Option("--system", help="System message (with --chat).", rich_help_panel="Model and sampling")
]
ShowSchema = Annotated[
    bool,
    typer.Option(
        "--show-schema/--withhold-schema",
        help="Put the schema text in the user message, or not.",
        rich_help_panel="Model and sampling",
    ),
]
Quiet = Annotated[bool, typer.Option("--quiet", help="No warnings when the model fights the grammar.")]
NoProgress = Annotated[bool, typer.Option("--no-progress", help="No progress display on stderr.")]
AllowExtraFields = Annotated[
    bool,
    typer.Option(
        "--allow-extra-fields",
        help="Pass unknown fields of --input records through into the results (else they are error records).",
    ),
]
ResumeFile = Annotated[
    Optional[str],
    typer.Option("--resume", metavar="OUT", help="Skip --input records whose ids already have results in OUT."),
]


@dataclass
class RunFlags:
    """The model and sampling flags; `params` is validated on construction."""

    model: str | None
    max_tokens: int
    params: SamplingParams
    chat: bool
    system: str | None
    show_schema: bool
    threads: int | None = None

    def load_options(self) -> dict[str, int]:
        """Model.load's thread settings these flags ask for (none: its defaults)."""
        return {} if self.threads is None else {"n_threads": self.threads, "batch_threads": self.threads}

    def job(self, model: LoadedModel, constraint: Constraint, **options: Any) -> GenerationJob:
        """The generation job these flags ask for (`options`: GenerationJob's others)."""
        from ministruct.jobs.job import GenerationJob

        return GenerationJob(
            model,
            constraint,
            self.params,
            max_tokens=self.max_tokens,
            chat=self.chat,
            system=self.system,
            show_schema=self.show_schema,
            **options,
        )


def _run_params(max_tokens: int) -> tuple:
    return (
        ("model", Model, None),
        ("max_tokens", MaxTokens, max_tokens),
        ("temperature", Temperature, 0.7),
        ("top_p", TopP, 0.9),
        ("top_k", TopK, 0),
        ("repeat_penalty", RepeatPenalty, 1.0),
        ("seed", Seed, 0),
        ("chat", Chat, True),
        ("system", System, None),
        ("show_schema", ShowSchema, True),
        ("threads", Threads, None),
    )


def with_flags(fn, target: str, specs: tuple, pack):
    """Replace `fn`'s parameter `target` by the flags in `specs`, packed by `pack(dict)`."""
    hints = typing.get_type_hints(fn, include_extras=True)
    sig = _inspect.signature(fn)
    params = [
        p.replace(annotation=hints.get(p.name, p.annotation)) for p in sig.parameters.values() if p.name != target
    ]
    kind = _inspect.Parameter.KEYWORD_ONLY
    extra = [_inspect.Parameter(name, kind, annotation=ann, default=default) for name, ann, default in specs]
    ordered = [p for p in params if p.kind != kind] + extra + [p for p in params if p.kind == kind]

    @functools.wraps(fn)
    def wrapper(*args, **kwargs):
        kwargs[target] = pack({name: kwargs.pop(name) for name, _, _ in specs})
        return fn(*args, **kwargs)

    wrapper.__signature__ = sig.replace(parameters=ordered, return_annotation=None)
    wrapper.__annotations__ = {p.name: p.annotation for p in ordered}
    del wrapper.__wrapped__  # Typer must see the new signature, not fn's
    return wrapper


def run_flags(max_tokens: int = 256):
    """Give a command the model and sampling flags; it receives `run: RunFlags`."""

    def pack(d: dict) -> RunFlags:
        from ministruct.decode.sampling import SamplingParams

        params = SamplingParams(
            temperature=d["temperature"],
            top_p=d["top_p"],
            top_k=d["top_k"],
            repeat_penalty=d["repeat_penalty"],
            seed=d["seed"],
        )
        return RunFlags(d["model"], d["max_tokens"], params, d["chat"], d["system"], d["show_schema"], d["threads"])

    return lambda fn: with_flags(fn, "run", _run_params(max_tokens), pack)
