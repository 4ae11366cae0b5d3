"""Constraint: a grammar and what it came from (a regex, a GBNF or Lark grammar, a JSON
Schema, a choice list or a tool list), and `load_constraint` for the command line's
constraint options."""

from __future__ import annotations

import dataclasses
import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Callable, Iterable

from ministruct.errors import InputError, SchemaError, UsageError
from ministruct.grammar.ir import Boundary, Grammar, TokenRef
from ministruct.grammar.json_text import parse_json
from ministruct.grammar.limits import MAX_JSON_NESTING, bounded, short_pointer, text_nesting_pointer
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar
from ministruct.grammar.think import free_text_then

if TYPE_CHECKING:
    from ministruct.grammar.tools import ToolSpec

BUNDLED_GRAMMARS = Path(__file__).resolve().parent / "bundled"
# the modules that read each kind of constraint, imported when one is first read (a process
# that reads a schema does not import the tool-call or GBNF front ends); `import_front_end`
# imports them ahead, for a benchmark that keeps imports off its clock as it does a peer's
FRONT_ENDS = {
    "regex": ("ministruct.grammar.regex.parse",),
    "grammar": ("ministruct.grammar.gbnf.parse",),
    "schema": ("ministruct.grammar.schema.compiler", "ministruct.grammar.regex.parse"),
    "choice": (),
    "lark": ("ministruct.grammar.lark.parse",),
    "tools": ("ministruct.grammar.tools", "ministruct.grammar.tool_grammar", "ministruct.grammar.regex.parse"),
}


def import_front_end(kind: str) -> None:
    """Import the modules that read a constraint of `kind` (a key of FRONT_ENDS)."""
    import importlib

    if kind not in FRONT_ENDS:
        raise UsageError(f"no constraint kind {kind!r} (kinds: {', '.join(FRONT_ENDS)})", parameter="kind")
    for name in FRONT_ENDS[kind]:
        importlib.import_module(name)


@dataclass
class Constraint:
    """A grammar plus what it came from (for headers, conversion and JSON parsing).

    Build one with `from_regex`, `from_gbnf`, `from_lark`, `from_json_schema`, `from_choices`
    or `from_tools`; `compile_grammar` takes it (or its `grammar`) with a vocabulary."""

    kind: str  # "regex" | "grammar" | "lark" | "schema" | "choice" | "tools"
    grammar: Grammar
    source: str
    text: str = ""
    schema: Any = None
    warnings: list[str] = field(default_factory=list)
    answer: "Constraint | None" = None  # with free text first: the constraint after CLOSE
    tools: ToolSpec | None = None

    def __post_init__(self) -> None:
        self.grammar = bounded(self.grammar)  # deep or shared parts as rules; refused when too large

    @property
    def boundary(self) -> Boundary | None:
        """Where the thinking ends, when the output thinks first (tool choice `auto`'s free
        text before a trigger is a phase of the grammar too, but it is no thinking: None)."""
        return self.grammar.boundary if self.tools is None else None

    @property
    def not_enforced(self) -> list[str]:
        """The JSON pointers of the schema keywords its grammar leaves out (a schema read with
        lenient=True): an output needs a check against the full schema (`gen` makes it).
        Empty for an exact grammar and for the other kinds of constraint."""
        part = self.answer_part
        return list(part.grammar.not_enforced) if part.kind == "schema" else []

    @property
    def answer_part(self) -> "Constraint":
        """The constraint on the answer: this one, or what it was built from by `think_first`."""
        return self.answer if self.answer is not None else self

    def think_first(
        self,
        *,
        close: str | TokenRef,
        open: str | None = None,
        free: Grammar | None = None,
        may_end_in_free_text: bool = False,
        max_free: int | None = None,
    ) -> "Constraint":
        """Free text (not containing `close`, or a text of `free`), then `close`, then this
        constraint (grammar/think.py `free_text_then`). The result keeps this constraint as
        `answer`: JSON parsing and checks of the answer use it."""
        answer = self.grammar
        if self.tools is not None and answer.boundary is not None:  # `auto`'s free text: one phase, the thinking's
            answer = dataclasses.replace(answer, boundary=None)
        g = free_text_then(
            answer,
            close=close,
            open=open,
            free=free,
            may_end_in_free_text=may_end_in_free_text,
            max_free=max_free,
        )
        return Constraint(
            self.kind, g, self.source, self.text, schema=self.schema, warnings=list(g.warnings), answer=self
        )

    @classmethod
    def from_regex(cls, pattern: str, *, source: str = "<regex>") -> "Constraint":
        """A regular expression (Python `re` syntax) the whole output must match."""
        from ministruct.grammar.regex.parse import parse_regex  # each front end (Lark) loads when used

        g = parse_regex(pattern, source=source)
        return cls("regex", g, source, pattern, warnings=list(g.warnings))

    @classmethod
    def from_gbnf(cls, text: str, *, root: str = "root", source: str = "<grammar>") -> "Constraint":
        """A GBNF grammar (llama.cpp's dialect), starting at rule `root`."""
        from ministruct.grammar.gbnf.parse import parse_gbnf

        g = parse_gbnf(text, source=source, root=root)
        return cls("grammar", g, source, text, warnings=list(g.warnings))

    @classmethod
    def from_lark(
        cls,
        text: str,
        options: SchemaOptions | None = None,
        *,
        source: str = "<lark>",
        lexer: str = "greedy",
        **option_values: Any,
    ) -> "Constraint":
        """A Lark grammar (llguidance's dialect), starting at rule `start`. `lexer`: "greedy"
        (each lexeme the longest match, as llguidance and Lark's own lexers: `SELECT aFROMb`
        is SELECT and one name) or "cfl" (any split of the text into terminals, as XGrammar).
        `options` (or its fields as keywords) are the SchemaOptions of its `%json {...}`
        schemas; their whitespace is flexible unless given (llguidance's default)."""
        from ministruct.grammar.lark.parse import parse_lark

        opts = options or SchemaOptions(**{"whitespace": "flexible", **option_values})
        g = parse_lark(text, source=source, schema_options=opts, lexer=lexer)
        return cls("lark", g, source, text, warnings=list(g.warnings))

    @classmethod
    def from_json_schema(
        cls, schema: Any, options: SchemaOptions | None = None, *, source: str = "<schema>", **option_values: Any
    ) -> "Constraint":
        """JSON texts of instances of `schema`: a parsed value (dict or bool) or JSON text.
        `options` (or its fields as keywords) are SchemaOptions."""
        if isinstance(schema, (str, bytes)):
            text = schema.decode("utf-8") if isinstance(schema, bytes) else schema
            schema = load_schema_text(text, source)
        else:
            text = json.dumps(schema, ensure_ascii=False)
        g = schema_to_grammar(schema, options, source=source, **option_values)
        return cls("schema", g, source, text, schema=schema, warnings=list(g.warnings))

    @classmethod
    def from_choices(cls, choices: list[str], *, source: str = "<choice>") -> "Constraint":
        """Exactly one of the given strings."""
        return cls("choice", Grammar.from_choices(choices, source=source), source, json.dumps(choices))

    @classmethod
    def from_tools(
        cls,
        tools: Any,
        *,
        choice: Any = "auto",
        parallel: bool = False,
        format: str = "json",
        chat_template: str | None = None,
        options: SchemaOptions | None = None,
        source: str = "<tools>",
        control_tokens: Iterable[str] = (),
    ) -> "Constraint":
        """Calls of the tools of an OpenAI `tools` list (parsed, or its JSON text).

        `choice`: auto, required, none, a tool's name (or OpenAI's `{"type": "function",
        "function": {"name": ...}}`); `parallel`: several calls in one answer; `format`: a
        model family (grammar/tool_families.py FAMILY_NAMES), or auto (the family
        `chat_template` writes; json, with a warning, when it writes no calls). `options`:
        SchemaOptions for the tools' parameters.
        `control_tokens`: texts the vocabulary has as control tokens; the format's markup
        among them (Qwen's `<tool_call>`) is that token in the grammar."""
        from ministruct.grammar.tool_grammar import tools_grammar
        from ministruct.grammar.tools import (
            ToolSpec,
            detection_note,
            load_tools_text,
            parse_tools,
            read_choice,
            read_format,
        )

        parsed = load_tools_text(tools, source) if isinstance(tools, str) else parse_tools(tools, source)
        fmt = read_format(format, chat_template)
        detected, warning = detection_note(chat_template) if format == "auto" else (None, None)
        control = frozenset(control_tokens) & frozenset(fmt.tags)
        spec = ToolSpec(parsed, read_choice(choice, parsed), bool(parallel), fmt, control, options, detected)
        g = tools_grammar(spec, options, source=source)
        text = json.dumps([t.to_openai() for t in parsed], ensure_ascii=False)
        warnings = ([warning] if warning and choice != "none" else []) + list(g.warnings)
        return cls("tools", g, source, text, warnings=warnings, tools=spec)

    def with_control_tokens(self, has_control: Callable[[str], bool]) -> "Constraint":
        """This tools constraint with its format's markup as control tokens where
        `has_control(text)` says the vocabulary has one (itself when none is)."""
        spec = self.tools
        if spec is None:
            return self
        control = frozenset(t for t in spec.format.tags if has_control(t))
        if control == spec.control:
            return self
        out = Constraint.from_tools(
            [t.to_openai() for t in spec.tools],
            choice=spec.choice,
            parallel=spec.parallel,
            format=spec.format.name,
            options=spec.options,
            source=self.source,
            control_tokens=control,
        )
        out.tools.detected = spec.detected  # type: ignore[union-attr]
        out.warnings = list(self.warnings)
        return out

    def describe(self) -> dict:
        """A JSON-ready summary for trace headers and reports."""
        out = {"kind": self.kind, "source": self.source, "text": self.text}
        b = self.boundary
        if b is not None:
            out["think"] = {"open": b.open, "close": b.close_text, "free_grammar": b.free_grammar}
        if self.tools is not None:
            spec = self.tools
            out.update(tool_choice=spec.choice, parallel_tool_calls=spec.parallel, tool_format=spec.format.name)
            if spec.detected is not None:
                out["tool_format_detected"] = spec.detected
        return out


def bundled_grammar_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_GRAMMARS.glob("*.gbnf"))


def read_text(path: str, what: str) -> tuple[str, str]:
    """(text, display name) of a file, or of stdin for '-'."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8"), str(path)
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InputError.unreadable(path, what, e) from None


def load_schema_text(text: str, source: str) -> Any:
    """The parsed schema; SchemaError naming the file when it is not JSON or nests too deeply to read."""
    try:
        return parse_json(text)
    except json.JSONDecodeError as e:
        raise SchemaError(
            f"{source}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", pointer=None, source=source
        ) from None
    except RecursionError:
        ptr = text_nesting_pointer(text) or "/"
        raise SchemaError(
            f"the schema nests deeper than {MAX_JSON_NESTING} levels", pointer=short_pointer(ptr), source=source
        ) from None


def load_constraint(
    *,
    regex: str | None = None,
    grammar: str | None = None,
    schema: str | None = None,
    choice: list[str] | None = None,
    lark: str | None = None,
    root: str | None = None,
    lark_lexer: str | None = None,
    schema_options: SchemaOptions | None = None,
    tools: str | list | None = None,
    tool_choice: Any = None,
    parallel_tool_calls: bool = False,
    tool_format: str = "auto",
    chat_template: str | None = None,
    **option_values: Any,
) -> Constraint:
    """The Constraint for exactly one of `regex` (a pattern), `grammar` (a GBNF file or a
    bundled name), `lark` (a Lark grammar file, or '-' for stdin), `schema` (a file, or
    '-' for stdin), `choice` and `tools` (a file, or a parsed tool list; with
    `tool_choice`, `parallel_tool_calls` and `tool_format`, whose `auto` reads
    `chat_template`).

    `schema_options` (or its fields as keywords) are SchemaOptions (a Lark grammar's `%json`
    whitespace is flexible unless given, as llguidance's)."""
    given = [
        n
        for n, v in (
            ("regex", regex),
            ("grammar", grammar),
            ("schema", schema),
            ("choice", choice or None),
            ("lark", lark),
            ("tools", tools),
        )
        if v is not None
    ]
    if tools is None:  # (first: `tool_choice` alone says what it lacks, not "give a constraint")
        for which, given_it in (
            ("tool_choice", tool_choice is not None),
            ("parallel_tool_calls", parallel_tool_calls),
            ("tool_format", tool_format != "auto"),
        ):
            if given_it:
                raise UsageError(f"`{which}` only applies to `tools`", parameter=which)
    if len(given) != 1:
        if not given:
            raise UsageError(
                "give a constraint: `regex`, `grammar`, `lark`, `schema`, `choice` or `tools`",
                parameter="constraint",
            )
        raise UsageError(
            f"give exactly one constraint, not {' and '.join(f'`{n}`' for n in given)}", parameter="constraint"
        )
    if root is not None and grammar is None:
        raise UsageError("`root` only applies to `grammar`", parameter="root")
    if lark_lexer is not None and lark is None:
        raise UsageError("`lark_lexer` only applies to `lark`", parameter="lark_lexer")
    options = schema_options or SchemaOptions(**option_values)
    if tools is not None:
        if isinstance(tools, str):
            text, source = read_text(tools, "tools")
            value: Any = text
        else:
            value, source = tools, "<tools>"
        return Constraint.from_tools(
            value,
            choice="auto" if tool_choice is None else tool_choice,
            parallel=parallel_tool_calls,
            format=tool_format,
            chat_template=chat_template,
            options=options,
            source=source,
        )
    if regex is not None:
        return Constraint.from_regex(regex)
    if grammar is not None:
        if grammar in bundled_grammar_names() and not Path(grammar).exists():
            path = str(BUNDLED_GRAMMARS / f"{grammar}.gbnf")
            text, source = read_text(path, "grammar")
            source = f"{grammar} (bundled)"
        elif not Path(grammar).exists() and "/" not in grammar and not grammar.endswith(".gbnf"):
            names = ", ".join(bundled_grammar_names())
            raise InputError(f"{grammar}: no such grammar file or bundled grammar (bundled: {names})")
        else:
            text, source = read_text(grammar, "grammar")
        return Constraint.from_gbnf(text, root=root or "root", source=source)
    if schema is not None:
        text, source = read_text(schema, "schema")
        return Constraint.from_json_schema(text, options, source=source)
    if lark is not None:
        text, source = read_text(lark, "Lark grammar")
        return Constraint.from_lark(  # (its own default options)
            text, schema_options, source=source, lexer=lark_lexer or "greedy", **option_values
        )
    return Constraint.from_choices(choice or [])
