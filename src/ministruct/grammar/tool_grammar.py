"""The one exact grammar of the tool calls a ToolSpec allows, in its family's markup.

Each call is one alternative per allowed tool: the markup with the tool's name as a
constant, then its arguments: through the JSON Schema front end (in the layout the
family's template writes, grammar/tool_families.py) for JSON families, or parameter by
parameter (grammar/tool_markup.py) for the XML and key/value ones. Around the calls, the
family's section markup, and (parallel) its separator.

`auto` with a trigger is grammar/think.py's `free_text_then`: free text up to the first
trigger, then the calls, or free text alone; where the vocabulary has the trigger as one
control token (`ToolSpec.control`), CLOSE is that token. A family without a trigger
(`json`, `llama3`) has no text that ends free text: its `auto` is a call, or a text that
does not begin with the calls' first character.
"""

from __future__ import annotations

import itertools
from dataclasses import replace
from typing import Any

from ministruct.errors import SchemaError
from ministruct.grammar.ir import (
    EMPTY,
    CharClass,
    Expr,
    Grammar,
    Literal,
    Repeat,
    RuleRef,
    TokenRef,
    alt,
    rename_refs,
    seq,
)
from ministruct.grammar.schema import SchemaOptions, schema_to_grammar
from ministruct.grammar.think import ANY_TEXT, free_text_then, text_not_starting_with
from ministruct.grammar.tool_families import ToolFamily
from ministruct.grammar.tool_markup import DIGITS, markup, markup_pieces, param_values, params_expr
from ministruct.grammar.tools import Tool, ToolSpec, call_start, calls_layout

_ID_CHARS = {
    "[a-zA-Z0-9]{9}": (CharClass(((48, 57), (65, 90), (97, 122))), 9, 9),
    "[a-zA-Z0-9_.:-]{1,64}": (CharClass(((45, 46), (48, 58), (65, 90), (95, 95), (97, 122))), 1, 64),
}


def tools_grammar(spec: ToolSpec, options: SchemaOptions | None = None, *, source: str = "<tools>") -> Grammar:
    """The one exact grammar of the answers `spec` allows (see the module doc)."""
    options = options or spec.options or SchemaOptions()
    if spec.choice == "none":
        return Grammar({"root": ANY_TEXT}, source=source)
    fam = spec.format
    if fam.layout is not None and options.whitespace != "flexible":
        options = replace(options, whitespace=fam.layout)
    builder = _Builder(spec, options, source)
    rules = builder.rules
    rules["call"] = alt(*(builder.call(tool, i) for i, tool in enumerate(spec.tools) if tool in spec.allowed))
    if fam.trigger is None or spec.choice != "auto":
        rules["root"] = builder.calls(after_trigger=False)
        if spec.choice == "auto":
            rules["calls"] = rules["root"]
            rules["root"] = alt(RuleRef("calls"), text_not_starting_with(call_start(spec)))
        return Grammar(rules, source=source, warnings=builder.warnings)
    rules["root"] = builder.calls(after_trigger=True)
    close: str | TokenRef = TokenRef(name=fam.trigger) if fam.trigger in spec.control else fam.trigger
    answer = Grammar(rules, source=source, warnings=builder.warnings)
    return free_text_then(answer, close=close, may_end_in_free_text=True)


class _Builder:
    def __init__(self, spec: ToolSpec, options: SchemaOptions, source: str) -> None:
        self.spec, self.options, self.source = spec, options, source
        self.fam: ToolFamily = spec.format
        self.control = spec.control
        self.rules: dict[str, Expr] = {"root": EMPTY}
        self.warnings: list[str] = []
        self.interned: dict[Expr, str] = {}
        self._prefixes = itertools.count()

    def text(self, text: str) -> Expr:
        """A family text without «name»/«args»: literals, «?optional» texts, «index», «id»."""
        out: list[Expr] = []
        for p in markup_pieces(text):
            if p.kind == "lit":
                out.append(markup(p.text, self.control))
            elif p.kind == "opt":
                out.append(Repeat(markup(p.text, self.control), 0, 1))
            elif p.kind == "index":
                out.append(DIGITS)
            elif p.kind == "id":
                chars, lo, hi = _ID_CHARS[self.fam.id_pattern or "[a-zA-Z0-9_.:-]{1,64}"]
                out.append(Repeat(seq(Literal(', "id": "'), Repeat(chars, lo, hi), Literal('"')), 0, 1))
            else:
                raise ValueError(f"placeholder «{p.kind}» out of place in {text!r}")
        return seq(*out)

    def calls(self, after_trigger: bool) -> Expr:
        lay = calls_layout(self.spec, after_trigger=after_trigger)
        first = RuleRef("call") if lay.first == self.fam.call else self.first_call(lay.first)
        more = Repeat(seq(self.text(lay.sep), RuleRef("call")), 0, None) if lay.several else EMPTY
        return seq(self.text(lay.open), first, more, self.text(lay.close))

    def first_call(self, text: str) -> Expr:
        """The first call when the trigger took the beginning of the call markup."""
        saved = self.fam
        self.fam = replace(saved, call=text)
        try:
            self.rules["first-call"] = alt(
                *(self.call(tool, i) for i, tool in enumerate(self.spec.tools) if tool in self.spec.allowed)
            )
        finally:
            self.fam = saved
        return RuleRef("first-call")

    def call(self, tool: Tool, index: int) -> Expr:
        out: list[Expr] = []
        where = f"{self.source}: tool {tool.name}"
        for p in markup_pieces(self.fam.call):
            if p.kind == "name":
                out.append(Literal(tool.name))
            elif p.kind == "args":
                if self.fam.json_args:
                    out.append(self.schema_expr(tool.parameters, where))
                else:
                    out.append(params_expr(self.fam, tool.parameters, lambda k, s: self.param(tool, k, s), where))
            else:
                out.append(self.text(_as_text(p)))
        return seq(*out)

    def param(self, tool: Tool, key: str, schema: Any) -> Expr:
        """One parameter `key` of `tool` in the family's markup, its value by `schema`."""
        where = f"{self.source}: tool {tool.name}: parameter {key}"
        defs = {
            k: tool.parameters[k]
            for k in ("$defs", "definitions")
            if isinstance(tool.parameters, dict) and k in tool.parameters
        }
        sub = {**schema, **defs} if defs and isinstance(schema, dict) else schema
        pieces = markup_pieces(self.fam.param or "")
        v = next(i for i, p in enumerate(pieces) if p.kind == "value")
        after = pieces[v + 1].text if v + 1 < len(pieces) and pieces[v + 1].kind == "lit" else ""
        rest = pieces[v + 2 :] if after else pieces[v + 1 :]
        try:
            options = param_values(
                self.fam,
                sub,
                after,
                self.control,
                lambda s: self.schema_expr(s, where),
                "/properties/" + key,
                self.rules.__setitem__,
            )
        except SchemaError as e:
            raise SchemaError(e.reason, pointer=e.pointer, keyword=e.keyword, source=where) from None
        alts = []
        for opt in options:
            out: list[Expr] = []
            for p in pieces[:v]:
                if p.kind == "key":
                    out.append(Literal(key))
                elif p.kind == "type":
                    out.append(Literal(opt.label))
                elif p.kind == "string":
                    out.append(Literal("true" if opt.label == "string" else "false"))
                else:
                    out.append(self.text(_as_text(p)))
            out.append(opt.expr)
            out.extend(self.text(_as_text(p)) for p in rest)
            alts.append(seq(*out))
        return alt(*alts)

    def schema_expr(self, schema: Any, where: str) -> Expr:
        """A schema through the front end; its rules join ours under a prefix of their own
        (a rule equal to one already there, with its references, is shared instead)."""
        try:
            g = schema_to_grammar(schema, self.options, source=where)
        except SchemaError as e:
            raise SchemaError(e.reason, pointer=e.pointer, keyword=e.keyword, source=where) from None
        prefix = f"t{next(self._prefixes)}-"
        refs = g.references()
        recursive = _recursive(refs)
        names = {n: prefix + n for n in recursive}
        memo: dict[int, Expr] = {}
        for n in _children_first(refs, g.root):
            if n in recursive or n == g.root:
                continue
            body = rename_refs(g.rules[n], names, memo)
            shared = self.interned.get(body)
            if shared is None:
                shared = self.interned[body] = prefix + n
                self.rules[shared] = body
            names[n] = shared
        for n in recursive:
            if n != g.root:
                self.rules[names[n]] = rename_refs(g.rules[n], names, memo)
        self.warnings.extend(f"{where}: {w}" for w in g.warnings if f"{where}: {w}" not in self.warnings)
        return rename_refs(g.rules[g.root], names, memo)


def _as_text(p) -> str:
    return {"lit": p.text, "opt": f"«?{p.text}»"}.get(p.kind, f"«{p.kind}»")


def _children_first(refs: dict[str, set[str]], root: str) -> list[str]:
    """Every rule reachable from `root`, each after the rules it refers to (cycles cut)."""
    order: list[str] = []
    seen: set[str] = set()
    stack: list[tuple[str, bool]] = [(root, False)]
    while stack:
        n, done = stack.pop()
        if done:
            order.append(n)
            continue
        if n in seen:
            continue
        seen.add(n)
        stack.append((n, True))
        stack.extend((m, False) for m in sorted(refs.get(n, ())) if m not in seen)
    return order


def _recursive(refs: dict[str, set[str]]) -> set[str]:
    """The rules that can reach themselves, and those that refer to one (named before the rest)."""
    out: set[str] = set()
    for start in refs:
        stack, seen = list(refs[start]), set()
        while stack:
            m = stack.pop()
            if m == start:
                out.add(start)
                break
            if m in seen:
                continue
            seen.add(m)
            stack.extend(refs.get(m, ()))
    grown = True
    while grown:  # a rule referring to a recursive one is renamed with it: its body is not final yet
        grown = False
        for n, rs in refs.items():
            if n not in out and rs & out:
                out.add(n)
                grown = True
    return out


__all__ = ["tools_grammar"]
