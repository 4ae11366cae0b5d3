"""A family's call markup (grammar/tool_families.py) as grammar, and read back.

`markup_pieces` splits a family's text into literals and placeholders. `param_values` is
the grammar of one parameter's value in the family's own encoding, constrained by that
parameter's schema: a string raw (or quoted), read up to the markup that follows it; any
other value as JSON through the schema front end. `params_expr` is the parameters of one
tool: declared ones only, each at most once, in the schema's order (sorted, for a family
that sorts), the required ones present. grammar/tool_text.py writes and reads the markup.
"""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass
from typing import Any, Callable

from ministruct.errors import SchemaError
from ministruct.grammar.ir import EMPTY, CharClass, Expr, Literal, Repeat, RuleRef, TokenRef, alt, seq
from ministruct.grammar.think import ANY_TEXT, kmp_table, text_without
from ministruct.grammar.tool_families import ToolFamily

PIECE = re.compile(r"«(\??)([^»]*)»")
ANY_CHAR = CharClass((), negated=True)
DIGITS = Repeat(CharClass(((48, 57),)), 1, 6)
_META = {"description", "title", "examples", "default", "$comment", "deprecated", "readOnly", "writeOnly"}
_RAW_KEYWORDS = _META | {"type", "enum", "const", "minLength", "maxLength", "pattern", "format"}
JSON_TYPES = ("string", "number", "integer", "boolean", "null", "object", "array")


@dataclass(frozen=True)
class Piece:
    kind: str  # lit | opt | name | args | index | id | key | value | type | string
    text: str = ""


def markup_pieces(text: str) -> list[Piece]:
    """The literals and «placeholders» of a family text, in order."""
    out: list[Piece] = []
    at = 0
    for m in PIECE.finditer(text):
        if m.start() > at:
            out.append(Piece("lit", text[at : m.start()]))
        out.append(Piece("opt", m.group(2)) if m.group(1) else Piece(m.group(2)))
        at = m.end()
    if at < len(text):
        out.append(Piece("lit", text[at:]))
    return out


def markup(text: str, control: frozenset[str]) -> Expr:
    """`text` with each of the `control` texts in it as that control token."""
    if not control or not text:
        return Literal(text)
    pattern = "(" + "|".join(re.escape(c) for c in sorted(control, key=len, reverse=True)) + ")"
    parts = [p for p in re.split(pattern, text) if p]
    return seq(*(TokenRef(name=p) if p in control else Literal(p) for p in parts))


def value_end(family: ToolFamily) -> str:
    """The markup that ends a string value: the quote, or the literal after «value» up to
    and including its first closing `>` (`</parameter>`, `<|close|>`)."""
    if family.values in ("quoted", "python"):
        return family.quote
    pieces = markup_pieces(family.param or "")
    i = next(k for k, p in enumerate(pieces) if p.kind == "value")
    after = pieces[i + 1].text if i + 1 < len(pieces) and pieces[i + 1].kind == "lit" else ""
    cut = after.find(">")
    return after if cut < 0 else after[: cut + 1]


def schema_types(schema: Any) -> list[str]:
    """The JSON types a (sub)schema's values may have, as far as `type`, `enum` and `const` say."""
    if schema is False:
        return []
    if not isinstance(schema, dict):
        return list(JSON_TYPES)
    t = schema.get("type")
    if isinstance(t, str):
        t = [t]
    if isinstance(t, list):
        out = [x for x in JSON_TYPES if x in t]
        return out + (["integer"] if "number" in out and "integer" not in out else [])
    values = (
        schema["enum"] if isinstance(schema.get("enum"), list) else [schema["const"]] if "const" in schema else None
    )
    if values is not None:
        return sorted(
            {json_type(v) for v in values} | ({"integer"} if any(json_type(v) == "number" for v in values) else set())
        )
    return list(JSON_TYPES)


def json_type(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number"
    if isinstance(v, str):
        return "string"
    return "array" if isinstance(v, list) else "object"


def restricted(schema: Any, types: list[str]) -> Any:
    """`schema` with its values limited to `types`."""
    if isinstance(schema, dict) and ("type" in schema or "enum" in schema or "const" in schema):
        out = dict(schema)
        if "type" in out:
            out["type"] = [t for t in schema_types(schema) if t in types]
        for k in ("enum",):
            if isinstance(out.get(k), list):
                out[k] = [
                    v for v in out[k] if json_type(v) in types or (json_type(v) == "number" and "integer" in types)
                ]
        return out
    return {"allOf": [schema if schema is not True else {}, {"type": types}]}


def raw_string(schema: Any, where: str, end: str = "") -> Expr | None:
    """The raw (unquoted, unescaped) strings of a string schema, or None for any text
    (the caller bounds it by the markup that follows, `end`: a length-bounded string leaves
    out `end`'s first character). SchemaError for keywords a raw string cannot be held to
    here."""
    from ministruct.grammar.schema.formats import SUPPORTED_FORMATS, format_expr
    from ministruct.grammar.schema.lengths import restrict_length

    if not isinstance(schema, dict):
        return None
    extra = set(schema) - _RAW_KEYWORDS
    if extra:
        raise SchemaError(
            f"a string written raw in the tool markup cannot be held to {', '.join(sorted(extra))}",
            pointer=where,
            keyword=sorted(extra)[0],
        )
    if "const" in schema or "enum" in schema:
        values = [schema["const"]] if "const" in schema else schema["enum"]
        return alt(*(Literal(v) for v in values if isinstance(v, str)))
    lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
    hi = None if hi is None else int(hi)
    fmt, pattern = schema.get("format"), schema.get("pattern")
    if fmt is not None and pattern is not None:
        raise SchemaError("format and pattern together are not written raw", pointer=where, keyword="pattern")
    if fmt is not None and fmt in SUPPORTED_FORMATS:
        r = restrict_length(format_expr(fmt), lo, hi)
        if r is None:
            raise SchemaError(f"format {fmt} with length bounds is not written raw", pointer=where, keyword="format")
        return r
    if pattern is not None:
        if lo or hi is not None:
            raise SchemaError("pattern with length bounds is not written raw", pointer=where, keyword="pattern")
        from ministruct.grammar.regex.parse import parse_regex

        flags = re.match(r"(\(\?[aiLmsux]+\))*", pattern).group(0)  # type: ignore[union-attr]
        g = parse_regex(f"{flags}[\\s\\S]*(?:{pattern[len(flags) :]})[\\s\\S]*", source=where)
        return g.rules[g.root]
    if lo or hi is not None:
        char = CharClass(((ord(end[0]), ord(end[0])),), negated=True) if end else ANY_CHAR
        return Repeat(char, lo, hi)
    return None


@dataclass
class ValueOption:
    """One way a parameter's value is written: the JSON type label (Kimi K3's type, DeepSeek
    V3.2's string="..."), and the value's expression followed by the markup after it."""

    label: str
    expr: Expr


def param_values(
    family: ToolFamily,
    schema: Any,
    after: str,
    control: frozenset[str],
    compile_json: Callable[[Any], Expr],
    where: str,
    define: Callable[[str, Expr], None] | None = None,
) -> list[ValueOption]:
    """The ways a value of `schema` is written in `family`, each followed by `after` (the
    literal text after «value» in the parameter markup)."""
    types = schema_types(schema)
    if not types:
        raise SchemaError("this parameter can take no value", pointer=where)
    out: list[ValueOption] = []
    if "string" in types:
        s_schema = restricted(schema, ["string"]) if types != ["string"] else schema
        if define is None:
            raise ValueError("param_values needs `define` to add rules")
        out.append(ValueOption("string", _string_then(family, s_schema, after, control, where, define)))
    rest = [t for t in types if t != "string"]
    if family.python_scalars:
        rest = _python_values(family, schema, rest, out, after, control, where)
    nested = [t for t in rest if t in ("object", "array", "null")]
    if family.values == "quoted" and nested:
        if define is None:
            raise ValueError("param_values needs `define` to add rules")
        sub = restricted(schema, nested) if nested != types else schema
        expr = _gemma_nested(family, sub, nested, control, compile_json, where, define)
        out.append(ValueOption("json", seq(expr, markup(after, control))))
        rest = [t for t in rest if t not in nested]
    if not rest:
        return out
    if "«type»" in (family.param or ""):  # one option per type name
        groups: dict[str, list[str]] = {}
        for t in rest:
            groups.setdefault("number" if t == "integer" else t, []).append(t)
        for label, ts in groups.items():
            expr = compile_json(restricted(schema, ts if "number" not in ts else ts + ["integer"]))
            out.append(ValueOption(label, seq(expr, markup(after, control))))
        return out
    expr = compile_json(restricted(schema, rest) if rest != types else schema)
    out.append(ValueOption("json", seq(expr, markup(after, control))))
    return out


_SERIALS = itertools.count()
MAX_BOUNDED_RULES = 300  # a length-bounded raw string: rules of its exact (matched end, length) product


def bounded_then_end(end: str, lo: int, hi: int | None, define: Callable[[str, Expr], None]) -> Expr | None:
    """Texts of `lo` to `hi` code points that do not contain `end`, then `end` (the first
    `end` of the whole is the one after the text): one rule per (length of `end` matched,
    code points so far; capped at `lo` without `hi`), as the matching automaton runs. None
    when that takes more than MAX_BOUNDED_RULES rules."""
    size = len(end)
    top = hi if hi is not None else lo
    if size * (top + 1) > MAX_BOUNDED_RULES:
        return None
    table = kmp_table(end)
    ends_at_last = []
    for j in range(size):  # does writing `end` from state j find `end` first at its own end?
        k, ok = j, True
        for i, ch in enumerate(end):
            k = table[k].get(ord(ch), 0)
            if k == size and i < size - 1:
                ok = False
                break
        ends_at_last.append(ok and k == size)
    names: dict[tuple[int, int], str] = {}
    pending: list[tuple[int, int]] = []
    serial = next(_SERIALS)

    def ref(j: int, c: int) -> Expr:
        if (j, c) not in names:
            names[(j, c)] = f"raw{serial}-{j}-{c}"
            pending.append((j, c))
        return RuleRef(names[(j, c)])

    root = ref(0, 0)
    bodies: dict[str, Expr] = {}
    while pending:
        j, c = pending.pop()
        options: list[Expr] = []
        nxt = c + 1 if hi is not None else min(c + 1, lo)
        if hi is None or c < hi:
            by_target: dict[int, list[int]] = {}
            for ch, t in table[j].items():
                if t < size:
                    by_target.setdefault(t, []).append(ch)
            for t, chs in sorted(by_target.items()):
                options.append(seq(CharClass(tuple((x, x) for x in sorted(chs))), ref(t, nxt)))
            options.append(seq(CharClass(tuple((x, x) for x in sorted(table[j])), negated=True), ref(0, nxt)))
        if c >= lo and ends_at_last[j]:
            options.append(Literal(end))
        bodies[names[(j, c)]] = alt(*options)
    for n, b in bodies.items():
        define(n, b)
    return root


def _string_then(
    family: ToolFamily,
    schema: Any,
    after: str,
    control: frozenset[str],
    where: str,
    define: Callable[[str, Expr], None],
) -> Expr:
    end = value_end(family)
    text_end = "" if any(end.startswith(c) for c in control) else (family.quote or end)
    if text_end and _only_lengths(schema):
        lo, hi = int(schema.get("minLength", 0)), schema.get("maxLength")
        exact = bounded_then_end(text_end, lo, None if hi is None else int(hi), define)
        if exact is not None:
            if family.values in ("quoted", "python"):
                q = markup(family.quote, control)
                return seq(q, exact, markup(after, control))
            return seq(exact, markup(after[len(end) :], control))
    raw = raw_string(schema, where, text_end)
    if family.values in ("quoted", "python"):
        q = markup(family.quote, control)
        inner = raw if raw is not None else (ANY_TEXT if family.quote in control else text_without(family.quote)[1])
        return seq(q, inner, q, markup(after, control))
    rest = after[len(end) :]
    if raw is not None:
        return seq(raw, markup(after, control))
    if any(end.startswith(c) for c in control):
        return seq(ANY_TEXT, markup(after, control))
    return seq(text_without(end)[0], markup(rest, control))


def gemma_value(
    family: ToolFamily,
    schema: Any,
    control: frozenset[str],
    compile_json: Callable[[Any], Expr],
    where: str,
    define: Callable[[str, Expr], None],
) -> Expr:
    """Any value of `schema` in Gemma 4's encoding: a string between quotes, numbers and
    booleans as JSON, objects, arrays and null its own way (_gemma_nested)."""
    types = schema_types(schema)
    opts: list[Expr] = []
    if "string" in types:
        opts.append(_string_then(family, restricted(schema, ["string"]), "", control, where, define))
    scalars = [t for t in types if t in ("number", "integer", "boolean")]
    if scalars:
        opts.append(compile_json(restricted(schema, scalars)))
    nested = [t for t in types if t in ("object", "array", "null")]
    if nested:
        opts.append(_gemma_nested(family, restricted(schema, nested), nested, control, compile_json, where, define))
    if not opts:
        raise SchemaError("this value can take no value", pointer=where)
    return alt(*opts)


def _gemma_nested(family, schema, types, control, compile_json, where, define) -> Expr:
    """Gemma 4's objects (`{key:value,...}`, keys bare and sorted), arrays (`[v,...]`) and
    null (`None`), their values nested the same way."""
    from dataclasses import replace

    def value(sub: Any, at: str) -> Expr:
        return gemma_value(family, sub, control, compile_json, at, define)

    opts: list[Expr] = []
    if "null" in types:
        opts.append(Literal("None"))
    if "object" in types:
        obj = replace(family, param="«key»:«value»", param_sep=",")
        body = params_expr(
            obj, schema, lambda k, sub: seq(Literal(k + ":"), value(sub, f"{where}/properties/{k}")), where
        )
        opts.append(seq(Literal("{"), body, Literal("}")))
    if "array" in types:
        unread = set(schema) - _META - {"type", "items", "minItems", "maxItems"} if isinstance(schema, dict) else set()
        if unread:
            raise SchemaError(
                f"gemma4 arrays cannot be held to {', '.join(sorted(unread))}", pointer=where, keyword=sorted(unread)[0]
            )
        items = schema.get("items", True) if isinstance(schema, dict) else True
        lo = int(schema.get("minItems", 0)) if isinstance(schema, dict) else 0
        hi = schema.get("maxItems") if isinstance(schema, dict) else None
        if hi == 0:
            opts.append(Literal("[]"))
        else:
            item = value(items, f"{where}/items")
            more = Repeat(seq(Literal(","), item), max(lo - 1, 0), None if hi is None else int(hi) - 1)
            body = seq(item, more)
            opts.append(seq(Literal("["), body if lo > 0 else Repeat(body, 0, 1), Literal("]")))
    return alt(*opts)


def _only_lengths(schema: Any) -> bool:
    """Whether a string schema says no more than minLength/maxLength."""
    return isinstance(schema, dict) and not (set(schema) - _META - {"type", "minLength", "maxLength"})


def _python_values(family, schema, rest, out, after, control, where) -> list[str]:
    """Values that Python writes its own way (True/False/None): options added to `out`;
    the types left for JSON (LFM2.5 writes arrays as Python lists: refused)."""
    tail = markup(after, control)
    if "boolean" in rest:
        enum = schema.get("enum") if isinstance(schema, dict) else None
        words = [w for v, w in ((True, "True"), (False, "False")) if enum is None or v in enum]
        out.append(ValueOption("boolean", seq(alt(*(Literal(w) for w in words)), tail)))
    if "null" in rest:
        out.append(ValueOption("null", seq(Literal("None"), tail)))
    if family.values == "python" and "array" in rest and isinstance(schema, dict) and "type" in schema:
        raise SchemaError("LFM2.5 writes arrays as Python lists, not read here", pointer=where, keyword="type")
    return [t for t in rest if t not in ("boolean", "null") and (t != "array" or family.values != "python")]


def params_expr(family: ToolFamily, schema: Any, param_expr: Callable[[str, Any], Expr], where: str) -> Expr:
    """The parameters of one tool in `family`'s markup: the declared ones, each at most
    once, in order, the required ones present, `param_sep` between two."""
    if schema is True or schema == {}:
        schema = {"type": "object", "properties": {}}
    if not isinstance(schema, dict) or not isinstance(schema.get("properties", {}), dict):
        raise SchemaError(f"{family.name} writes parameters one by one: they must be an object", pointer=where)
    unread = set(schema) - _META - {"type", "properties", "required", "additionalProperties", "$defs", "definitions"}
    if unread:
        raise SchemaError(
            f"{family.name} writes parameters one by one: {', '.join(sorted(unread))} on the parameters "
            "object cannot be enforced there (use --tool-format json)",
            pointer=where,
            keyword=sorted(unread)[0],
        )
    props = dict(schema.get("properties", {}))
    required = set(schema.get("required", []))
    missing = required - set(props)
    if missing:
        raise SchemaError(f"required parameter {sorted(missing)[0]} is not declared", pointer=where, keyword="required")
    keys = sorted(props, key=lambda k: (k.lower(), k)) if family.sorted_keys else list(props)
    items = [(param_expr(k, props[k]), k in required) for k in keys]
    sep = Literal(family.param_sep) if family.param_sep else None
    if sep is None:
        return seq(*(e if req else Repeat(e, 0, 1) for e, req in items))

    def tail(j: int) -> Expr:
        return seq(*(seq(sep, e) if req else Repeat(seq(sep, e), 0, 1) for e, req in items[j:]))

    options: list[Expr] = []
    for i, (e, req) in enumerate(items):
        options.append(seq(e, tail(i + 1)))
        if req:
            break
    else:
        options.append(EMPTY)
    return alt(*options) if options else EMPTY


__all__ = [
    "PIECE",
    "JSON_TYPES",
    "Piece",
    "json_type",
    "markup",
    "markup_pieces",
    "param_values",
    "params_expr",
    "gemma_value",
    "raw_string",
    "schema_types",
    "value_end",
]
