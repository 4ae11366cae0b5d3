"""Flag definitions shared by the commands (cli.md is the contract for their names)."""

from __future__ import annotations

import dataclasses
import functools
import inspect as _inspect
import os
import typing
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated, Any, Optional

import typer

from ministruct.decode.defaults import DEFAULT_PARALLEL
from ministruct.errors import UsageError

if TYPE_CHECKING:  # the library loads when a command runs, not for its flags (--help)
    from ministruct.decode.model import Model as LoadedModel
    from ministruct.decode.sampling import SamplingParams
    from ministruct.grammar.constraint import Constraint
    from ministruct.jobs.job import GenerationJob
    from ministruct.jobs.think import ThinkSettings

Regex = Annotated[
    Optional[str],
    typer.Option("--regex", help="A regular expression the whole output must match.", rich_help_panel="Constraint"),
]
GrammarOpt = Annotated[
    Optional[str],
    typer.Option(
        "--grammar",
        help="A GBNF grammar file, or a bundled grammar's name (json, digits, ...).",
        rich_help_panel="Constraint",
    ),
]
Schema = Annotated[
    Optional[str], typer.Option("--schema", help="A JSON Schema file ('-' for stdin).", rich_help_panel="Constraint")
]
Schemas = Annotated[
    Optional[list[str]],
    typer.Option(
        "--schema",
        help="A JSON Schema file ('-' for stdin); repeat the flag for several.",
        rich_help_panel="Constraint",
    ),
]
Choice = Annotated[
    Optional[list[str]],
    typer.Option("--choice", help="One of these strings (repeat the flag).", rich_help_panel="Constraint"),
]
LarkOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lark",
        metavar="FILE|-",
        help="A Lark grammar (llguidance's dialect: rules, TERMINALS, %ignore, %import common, %json, <|token|>); "
        "'-' for stdin.",
        rich_help_panel="Constraint",
    ),
]
LarkLexerOpt = Annotated[
    Optional[str],
    typer.Option(
        "--lark-lexer",
        help="How a --lark grammar's lexemes split the text: greedy (the default; each lexeme the longest "
        "match, as llguidance and Lark's own lexers) or cfl (any split into terminals, as XGrammar).",
        rich_help_panel="Constraint",
    ),
]
ToolsOpt = Annotated[
    Optional[str],
    typer.Option(
        "--tools",
        help="A tool list in OpenAI's tools shape (a JSON file, '-' for stdin): the output is a call of one of them.",
        rich_help_panel="Constraint",
    ),
]
ToolChoice = Annotated[
    Optional[str],
    typer.Option(
        "--tool-choice",
        help="With --tools: auto (free text or a call, the default), required (a call), none (free text) "
        "or a tool's name (a call of that tool).",
        rich_help_panel="Constraint",
    ),
]
ParallelToolCalls = Annotated[
    bool,
    typer.Option(
        "--parallel-tool-calls", help="With --tools: several calls in one answer.", rich_help_panel="Constraint"
    ),
]
ToolFormatOpt = Annotated[
    str,
    typer.Option(
        "--tool-format",
        help="With --tools: a model family's call markup (json, hermes, qwen3_coder, llama3, mistral, harmony, "
        "deepseek_v3_1, deepseek_r1, deepseek_v3_2, kimi_k2, kimi_k3, glm, minimax, seed_oss, command_r7b, "
        "phi4_mini, gemma4, nemotron, apriel, lfm2, lfm2_pythonic; docs/tools.md), or auto: the family the "
        "chat template writes (json, with a warning, when it writes no tool calls, or without a template).",
        rich_help_panel="Constraint",
    ),
]
ChatTemplateOpt = Annotated[
    Optional[str],
    typer.Option(
        "--chat-template",
        metavar="FILE",
        help="A Jinja chat template to use instead of the model's (tokenizer.chat_template): it formats the "
        "prompt and says the tool-call markup (--tool-format auto) and think tags (--think). For GGUFs "
        "without one, and for check and convert, which load no model.",
        rich_help_panel="Constraint",
    ),
]
Root = Annotated[Optional[str], typer.Option("--root", help="Start rule of a --grammar.", rich_help_panel="Constraint")]
Whitespace = Annotated[
    Optional[str],
    typer.Option(
        "--whitespace",
        help="JSON whitespace: spaced (one space after : and , as json.dumps writes it; the default), "
        "compact, flexible (the model chooses, at most 20 in a row) or pretty. A --lark grammar's %json "
        "is flexible unless given, as llguidance's.",
        rich_help_panel="Constraint",
    ),
]
Lenient = Annotated[
    bool,
    typer.Option(
        "--lenient",
        help="Ignore schema keywords that cannot be enforced (one warning each).",
        rich_help_panel="Constraint",
    ),
]
OneOfAsAnyOf = Annotated[
    bool,
    typer.Option(
        "--oneof-as-anyof", help="Treat a oneOf whose branches may overlap as anyOf.", rich_help_panel="Constraint"
    ),
]
SchemaDocuments = Annotated[
    Optional[list[str]],
    typer.Option(
        "--schema-documents",
        metavar="URI=PATH",
        help="Where a schema's remote $refs are found: URI (or a prefix ending in /) = a JSON file or a "
        "directory whose relative paths follow the prefix. Repeatable. Nothing is fetched from the network.",
        rich_help_panel="Constraint",
    ),
]
ExtraProperties = Annotated[
    Optional[str],
    typer.Option(
        "--extra-properties",
        help="spec: objects may carry properties the schema does not name, unless it forbids them (JSON Schema's "
        "meaning; the default of check); explicit: only where additionalProperties, patternProperties or "
        "unevaluatedProperties allow them, and no items past prefixItems unless items says so (the default "
        "of gen, inspect, collapse, bench and convert).",
        rich_help_panel="Constraint",
    ),
]

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


def constraint_from_flags(
    regex: str | None,
    grammar: str | None,
    schema: str | None,
    choice: list[str] | None,
    lark: str | None,
    root: str | None,
    whitespace: str,
    lenient: bool,
    oneof_as_anyof: bool = False,
    extra_properties: str = "explicit",
    tools: ToolFlags | None = None,
    lark_lexer: str | None = None,
    schema_documents: list[str] | None = None,
) -> Constraint:
    """The one constraint the flags name (UsageError when none or several)."""
    from ministruct.grammar.constraint import load_constraint
    from ministruct.grammar.schema.options import SchemaOptions

    options = SchemaOptions(
        whitespace, lenient, oneof_as_anyof, extra_properties, documents=documents_from_flag(schema_documents)
    )
    given = dict(
        regex=regex, grammar=grammar, schema=schema, choice=choice, lark=lark, root=root, lark_lexer=lark_lexer
    )
    return load_constraint(**given, schema_options=options, **asdict(tools or ToolFlags()))


def documents_from_flag(values: list[str] | None) -> list[tuple[str, str]]:
    """--schema-documents URI=PATH values as SchemaOptions.documents pairs."""
    out = []
    for v in values or []:
        uri, eq, path = v.partition("=")
        if not eq or not uri or not path:
            raise UsageError(f"--schema-documents takes URI=PATH, not {v!r}")
        out.append((uri, path))
    return out


@dataclass
class ToolFlags:
    """--tools and its companions (named as load_constraint's parameters); `chat_template` is
    the model's, for --tool-format auto."""

    tools: str | list | None = None
    tool_choice: str | None = None
    parallel_tool_calls: bool = False
    tool_format: str = "auto"
    chat_template: str | None = None


# ---------------------------------------------------------------- shared flag groups


@dataclass
class ConstraintFlags:
    """The constraint flags as given; `load()` builds the one Constraint they name."""

    regex: str | None
    grammar: str | None
    schema: str | list[str] | None  # a list for commands that take several (constraint_flags(several_schemas=True))
    choice: list[str] | None
    lark: str | None
    root: str | None
    whitespace: str | None  # None: spaced, flexible for a Lark grammar's %json (llguidance's default)
    lenient: bool
    oneof_as_anyof: bool
    extra_properties: str | None = None  # None: the command's default
    tools: str | list | None = None
    tool_choice: str | None = None
    parallel_tool_calls: bool = False
    tool_format: str = "auto"
    chat_template_file: str | None = None  # --chat-template
    chat_template: str | None = None  # the template --tool-format auto reads (with_model, or the file)
    lark_lexer: str | None = None  # None: greedy
    schema_documents: list[str] | None = None  # --schema-documents URI=PATH

    def refuse_stdin_twice(self, input: str | None) -> None:
        """UsageError when --input and a constraint flag would both read stdin ('-')."""
        if input != "-":
            return
        for flag, value in (("--schema", self._schemas()), ("--lark", [self.lark]), ("--tools", [self.tools])):
            if "-" in value:
                raise UsageError(f"--input and {flag} both read stdin ('-'): give one of them a file")

    @property
    def kind(self) -> str | None:
        """Which kind of constraint the flags name (a key of grammar/constraint.py's
        FRONT_ENDS), None when none; `load()` says what is wrong with several."""
        for kind in ("tools", "regex", "grammar", "schema", "choice", "lark"):
            if getattr(self, kind):
                return kind
        return None

    def load(self, extra_default: str = "explicit") -> Constraint:
        """The one Constraint; `extra_default` is the command's --extra-properties default."""
        schemas = self._schemas()
        if len(schemas) > 1:
            raise UsageError("give one --schema (this command does not take several)")
        return self._load(schemas[0] if schemas else None, extra_default)

    def template_text(self) -> str | None:
        """The text of --chat-template FILE (None without it)."""
        if self.chat_template_file is None:
            return None
        from ministruct.grammar.constraint import read_text

        return read_text(self.chat_template_file, "chat template")[0]

    def with_model(self, model: str | None) -> "ConstraintFlags":
        """These flags with the chat template --tool-format auto reads: --chat-template's, else
        the one of `model` (a path; None: the default model)."""
        from dataclasses import replace

        if self.chat_template_file is not None:
            return replace(self, chat_template=self.template_text())
        if self.tools is None or self.tool_format != "auto":
            return self
        from ministruct.decode.model import Model as _Model

        return replace(self, chat_template=_Model.load(model, vocab_only=True).chat_template)

    def apply_template(self, model: "LoadedModel") -> "LoadedModel":
        """`model` formatting prompts with --chat-template's template, when given."""
        if self.chat_template_file is not None:
            model.use_chat_template(self.chat_template or self.template_text() or "")
        return model

    def load_each(self) -> list[Constraint]:
        """One Constraint per --schema when several are given, else the one the flags name."""
        schemas = self._schemas()
        seen = {s for s in schemas if schemas.count(s) > 1}
        if seen:
            raise UsageError(f"--schema {sorted(seen)[0]} is given twice")
        if len(schemas) <= 1:
            return [self._load(schemas[0] if schemas else None)]
        return [self._load(s) for s in schemas]

    def _schemas(self) -> list[str]:
        if self.schema is None:
            return []
        return [self.schema] if isinstance(self.schema, str) else list(self.schema)

    def _load(self, schema: str | None, extra_default: str = "explicit") -> Constraint:
        from ministruct.grammar.schema.options import DEFAULT_WHITESPACE

        if self.chat_template_file is not None and self.chat_template is None:
            return dataclasses.replace(self, chat_template=self.template_text())._load(schema, extra_default)
        return constraint_from_flags(
            self.regex,
            self.grammar,
            schema,
            self.choice,
            self.lark,
            self.root,
            self.whitespace or ("flexible" if self.lark is not None else DEFAULT_WHITESPACE),
            self.lenient,
            self.oneof_as_anyof,
            self.extra_properties or extra_default,
            ToolFlags(self.tools, self.tool_choice, self.parallel_tool_calls, self.tool_format, self.chat_template),
            self.lark_lexer,
            self.schema_documents,
        )


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


_CONSTRAINT_PARAMS = (
    ("regex", Regex, None),
    ("grammar", GrammarOpt, None),
    ("schema", Schema, None),
    ("choice", Choice, None),
    ("lark", LarkOpt, None),
    ("lark_lexer", LarkLexerOpt, None),
    ("root", Root, None),
    ("whitespace", Whitespace, None),
    ("lenient", Lenient, False),
    ("oneof_as_anyof", OneOfAsAnyOf, False),
    ("extra_properties", ExtraProperties, None),
    ("schema_documents", SchemaDocuments, None),
    ("tools", ToolsOpt, None),
    ("tool_choice", ToolChoice, None),
    ("parallel_tool_calls", ParallelToolCalls, False),
    ("tool_format", ToolFormatOpt, "auto"),
    ("chat_template_file", ChatTemplateOpt, None),
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


def _with_flags(fn, target: str, specs: tuple, pack):
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


def constraint_flags(fn=None, *, several_schemas: bool = False):
    """Give a command the constraint flags (cli.md); it receives `constraint: ConstraintFlags`.

    Use bare (`@constraint_flags`), or `@constraint_flags(several_schemas=True)` to let
    --schema repeat (the command then calls `constraint.load_each()`).
    """
    specs = _CONSTRAINT_PARAMS
    if several_schemas:
        specs = tuple((n, Schemas if n == "schema" else a, d) for n, a, d in specs)

    def deco(f):
        return _with_flags(f, "constraint", specs, lambda d: ConstraintFlags(**d))

    return deco if fn is None else deco(fn)


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

    return lambda fn: _with_flags(fn, "run", _run_params(max_tokens), pack)


# ---------------------------------------------------------------- gen's own flags


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


# ---------------------------------------------------------------- think first (issue 23)

Think = Annotated[
    bool,
    typer.Option(
        "--think",
        help="Let the model write free text first, then the constrained answer after a closing tag. Uses the "
        "model's own think tags where its vocabulary or chat template has them; otherwise the plain-text pair "
        "<think> ... </think>, which the user message announces (the bundled models have none).",
        rich_help_panel="Think first",
    ),
]
ThinkOpen = Annotated[
    Optional[str],
    typer.Option(
        "--think-open",
        metavar="TEXT|none",
        help="The text that opens the thinking (optional in the output); 'none': no opening text. Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkClose = Annotated[
    Optional[str],
    typer.Option(
        "--think-close",
        metavar="TEXT",
        help="The text that ends the thinking (a control token when the vocabulary has one by that text). "
        "Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkTokens = Annotated[
    Optional[int],
    typer.Option(
        "--think-tokens",
        min=0,
        help="The thinking budget: after N tokens only tokens toward the closing text are legal and it is "
        "fast-forwarded. Implies --think.",
        rich_help_panel="Think first",
    ),
]
ThinkGrammar = Annotated[
    Optional[str],
    typer.Option(
        "--think-grammar",
        metavar="FILE",
        help="A GBNF grammar the thinking must follow (optional). Implies --think.",
        rich_help_panel="Think first",
    ),
]


@dataclass
class ThinkFlags:
    """The think-first flags as given; `settings(...)` the ThinkSettings they ask for."""

    think: bool
    think_open: str | None
    think_close: str | None
    think_tokens: int | None
    think_grammar: str | None

    def requested(self) -> bool:
        return self.think or any(
            v is not None for v in (self.think_open, self.think_close, self.think_tokens, self.think_grammar)
        )

    def settings(self, model: "LoadedModel | None" = None, template: str | None = None) -> "ThinkSettings | None":
        """None without think flags; else the preset (the model's tags, or the family's of
        `template` without a model, or the plain pair) with the flags given over it."""
        from ministruct.jobs.think import preset, preset_of_template

        if not self.requested():
            return None
        base = preset(model.vocabulary, model.chat_template) if model is not None else preset_of_template(template)
        changes: dict[str, Any] = {}
        if self.think_open is not None:
            changes["open"] = None if self.think_open == "none" else self.think_open
        if self.think_close is not None:
            changes["close"] = self.think_close
        if self.think_open is not None or self.think_close is not None:
            changes["announce"] = True  # tags of the user's choosing: the model must be told
        if self.think_grammar is not None:
            from ministruct.grammar.constraint import load_constraint

            changes["grammar"] = load_constraint(grammar=self.think_grammar).grammar
        return dataclasses.replace(base, think_tokens=self.think_tokens, **changes)


_THINK_PARAMS = (
    ("think", Think, False),
    ("think_open", ThinkOpen, None),
    ("think_close", ThinkClose, None),
    ("think_tokens", ThinkTokens, None),
    ("think_grammar", ThinkGrammar, None),
)


def think_flags(fn):
    """Give a command the think-first flags; it receives `think: ThinkFlags`."""
    return _with_flags(fn, "think", _THINK_PARAMS, lambda d: ThinkFlags(**d))


# ---------------------------------------------------------------- the server fleet (gen)

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
    return _with_flags(fn, "fleet", _FLEET_PARAMS, lambda d: FleetFlags(**d))
