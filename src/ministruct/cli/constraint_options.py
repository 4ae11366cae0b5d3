"""The constraint flags (cli.md is the contract for their names): --regex, --grammar,
--schema, --choice, --lark, --tools and their companions, gathered into ConstraintFlags,
which loads the one Constraint they name; `constraint_flags` gives them to a command."""

from __future__ import annotations

import dataclasses
from dataclasses import asdict, dataclass
from typing import TYPE_CHECKING, Annotated, Optional

import typer

from ministruct.cli.options import with_flags
from ministruct.errors import UsageError

if TYPE_CHECKING:  # the library loads when a command runs, not for its flags (--help)
    from ministruct.decode.model import Model as LoadedModel
    from ministruct.grammar.constraint import Constraint

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


def constraint_flags(fn=None, *, several_schemas: bool = False):
    """Give a command the constraint flags (cli.md); it receives `constraint: ConstraintFlags`.

    Use bare (`@constraint_flags`), or `@constraint_flags(several_schemas=True)` to let
    --schema repeat (the command then calls `constraint.load_each()`).
    """
    specs = _CONSTRAINT_PARAMS
    if several_schemas:
        specs = tuple((n, Schemas if n == "schema" else a, d) for n, a, d in specs)

    def deco(f):
        return with_flags(f, "constraint", specs, lambda d: ConstraintFlags(**d))

    return deco if fn is None else deco(fn)
