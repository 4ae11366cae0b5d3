"""One constraint from the user's flags: regex, GBNF grammar, JSON Schema or choice list."""

from __future__ import annotations

import json
import sys
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from ministruct.errors import InputError, SchemaError, UsageError
from ministruct.grammar.ir import Grammar

BUNDLED_GRAMMARS = Path(__file__).resolve().parent / "grammars"


@dataclass
class Constraint:
    """A grammar plus what it came from (for headers, conversion and JSON parsing)."""

    kind: str  # "regex" | "grammar" | "schema" | "choice"
    grammar: Grammar
    source: str
    text: str = ""
    schema: Any = None
    warnings: list[str] = field(default_factory=list)

    def __post_init__(self) -> None:
        from ministruct.grammar.limits import bounded

        self.grammar = bounded(self.grammar)  # deep or shared parts as rules; refused when too large

    def describe(self) -> dict:
        """A JSON-ready summary for trace headers and reports."""
        return {"kind": self.kind, "source": self.source, "text": self.text}


def bundled_grammar_names() -> list[str]:
    return sorted(p.stem for p in BUNDLED_GRAMMARS.glob("*.gbnf"))


def read_text(path: str, what: str) -> tuple[str, str]:
    """(text, display name) of a file, or of stdin for '-'."""
    if path == "-":
        return sys.stdin.read(), "<stdin>"
    p = Path(path)
    try:
        return p.read_text(encoding="utf-8"), str(path)
    except FileNotFoundError:
        raise InputError(f"{path}: no such {what} file") from None
    except IsADirectoryError:
        raise InputError(f"{path}: is a directory, not a {what} file") from None
    except UnicodeDecodeError as e:
        raise InputError(f"{path}: not UTF-8 text (byte {e.start})") from None
    except OSError as e:
        raise InputError(f"{path}: cannot read {what} file: {e.strerror}") from None


def load_schema_text(text: str, source: str) -> Any:
    """The parsed schema; SchemaError naming the file when it is not JSON or nests too deeply to read."""
    try:
        return json.loads(text)
    except json.JSONDecodeError as e:
        raise SchemaError(
            f"{source}: not valid JSON: {e.msg} (line {e.lineno}, column {e.colno})", pointer=None, source=source
        ) from None
    except RecursionError:
        from ministruct.grammar.limits import MAX_JSON_NESTING, short_pointer, text_nesting_pointer

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
    whitespace: str = "compact",
    lenient: bool = False,
    oneof_as_anyof: bool = False,
    extra_properties: str = "explicit",
) -> Constraint:
    """Build the Constraint for exactly one of the constraint flags.

    `extra_properties` ("explicit" or "spec") is the schema's generation language:
    see `grammar.schema.schema_to_grammar`."""
    given = [
        n
        for n, v in (
            ("--regex", regex),
            ("--grammar", grammar),
            ("--schema", schema),
            ("--choice", choice or None),
            ("--lark", lark),
        )
        if v is not None
    ]
    if len(given) != 1:
        if not given:
            raise UsageError("give a constraint: --regex, --grammar, --schema or --choice")
        raise UsageError(f"give exactly one constraint, not {' and '.join(given)}")
    if root is not None and grammar is None:
        raise UsageError("--root only applies to --grammar")
    if regex is not None:
        from ministruct.grammar.regex import parse_regex

        g = parse_regex(regex, source="<regex>")
        return Constraint("regex", g, "<regex>", regex, warnings=list(g.warnings))
    if grammar is not None:
        from ministruct.grammar.gbnf import parse_gbnf

        if grammar in bundled_grammar_names() and not Path(grammar).exists():
            path = str(BUNDLED_GRAMMARS / f"{grammar}.gbnf")
            text, source = read_text(path, "grammar")
            source = f"{grammar} (bundled)"
        elif not Path(grammar).exists() and "/" not in grammar and not grammar.endswith(".gbnf"):
            names = ", ".join(bundled_grammar_names())
            raise InputError(f"{grammar}: no such grammar file or bundled grammar (bundled: {names})")
        else:
            text, source = read_text(grammar, "grammar")
        g = parse_gbnf(text, source=source, root=root or "root")
        return Constraint("grammar", g, source, text, warnings=list(g.warnings))
    if schema is not None:
        from ministruct.grammar.schema import schema_to_grammar

        text, source = read_text(schema, "schema")
        value = load_schema_text(text, source)
        g = schema_to_grammar(
            value,
            whitespace=whitespace,
            lenient=lenient,
            source=source,
            oneof_as_anyof=oneof_as_anyof,
            extra_properties=extra_properties,
        )
        return Constraint("schema", g, source, text, schema=value, warnings=list(g.warnings))
    if choice:
        return Constraint("choice", Grammar.from_choices(choice), "<choice>", json.dumps(choice))
    raise UsageError("--lark grammars are not supported yet; convert the grammar to GBNF")
