"""`unevaluatedProperties` / `unevaluatedItems` rewritten away, exactly, before compiling.

What a schema node S "evaluates" of an object (its property names) or an array (its item
indices) is decided by its structure: its own `properties` / `patternProperties` /
`additionalProperties` (`prefixItems` / `items` / `contains`), and the same in every
in-place subschema that applies and validates (`allOf`, the valid `anyOf` branches, the
one valid `oneOf` branch, `if` when it holds and then `then`, else `else`,
`dependentSchemas` whose property is present, `$ref` targets); a nested
`unevaluated*` evaluates everything; `not` evaluates nothing.

A *choice* is a set of conditions (subschemas that validate, as `$ref`s to them) with
what is then evaluated. The more a choice evaluates, the weaker the `unevaluated*`
constraint, so S is valid iff S without the keyword holds and some choice holds with
the keyword applied to what that choice leaves unevaluated: for `anyOf` the choices are
the subsets of branches (a subset that validates evaluates no more than all the valid
branches), for `oneOf` each branch, for `if` "if holds" and "if fails and else holds"
(`not` of `if`: the compiler's negation), for `dependentSchemas` "the property is
present" or nothing. The keyword applied to what is left is a plain schema:
`{"properties": {listed: true}, "patternProperties": {evaluated patterns: true},
"additionalProperties": U}` for properties, `{"prefixItems": [true] * n, "items":
{"anyOf": [contains schemas..., U]}}` for items (an item a `contains` schema matches is
evaluated, so it is valid as one of them or as U).

So S becomes S without the keyword, with one more `allOf` entry: the restriction, or
the `anyOf` of the choices. Pointers to the document's nodes stay as they were (the
entry is appended), so the `$ref`s of the conditions reach the rewritten nodes, which
are equivalent to the originals. Refused, by pointer: a `$dynamicRef` in the way, a
choice set past MAX_CHOICES, a condition the document cannot point at.
"""

from __future__ import annotations

import copy
import itertools
import json
import urllib.parse
from dataclasses import dataclass, field
from typing import Any, Callable

from ministruct.errors import SchemaError
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.merge import Resolver, node_at

MAX_CHOICES = 64  # choices of one node (each becomes a branch of a union)
KEYWORDS = ("unevaluatedProperties", "unevaluatedItems")


@dataclass(frozen=True)
class Evaluated:
    """What one choice evaluates: property names, patterns, all properties; a prefix of
    items, all items, the pointers of `contains` schemas."""

    names: frozenset = frozenset()
    patterns: frozenset = frozenset()
    all_props: bool = False
    prefix: int = 0
    all_items: bool = False
    contains: frozenset = frozenset()

    def __or__(self, o: "Evaluated") -> "Evaluated":
        return Evaluated(
            self.names | o.names,
            self.patterns | o.patterns,
            self.all_props or o.all_props,
            max(self.prefix, o.prefix),
            self.all_items or o.all_items,
            self.contains | o.contains,
        )

    def covers(self, o: "Evaluated", kind: str) -> bool:
        """Does this evaluate at least what `o` does (for `kind`)?"""
        if kind == "properties":
            return self.all_props or (not o.all_props and o.names <= self.names and o.patterns <= self.patterns)
        return self.all_items or (not o.all_items and o.prefix <= self.prefix and o.contains <= self.contains)

    def empty(self, kind: str) -> bool:
        if kind == "properties":
            return not (self.names or self.patterns or self.all_props)
        return not (self.prefix or self.all_items or self.contains)


NOTHING = Evaluated()


@dataclass(frozen=True)
class Choice:
    conds: frozenset = field(default_factory=frozenset)  # JSON texts of condition schemas
    ev: Evaluated = NOTHING

    def __and__(self, o: "Choice") -> "Choice":
        return Choice(self.conds | o.conds, self.ev | o.ev)


class _TooMany(Exception):
    pass


class Rewriter:
    """The rewrite of one document (read from the original, written to a copy)."""

    def __init__(self, root: Any, source: str, dropped: list[tuple[str, str]] | None = None) -> None:
        self.root, self.source = root, source
        self.dropped = dropped  # None: refuse what cannot be done; a list: drop it, (pointer, warning)
        self.res = Resolver(root, lambda m, p, k=None: SchemaError(m, pointer=p, keyword=k, source=source))

    def error(self, message: str, ptr: str, keyword: str) -> SchemaError:
        return SchemaError(message, pointer=ptr or "/", keyword=keyword, source=self.source)

    # ------------------------------------------------------------ references to nodes

    def ref_to(self, target: str, at: str, keyword: str) -> dict:
        """A `$ref` placed at `at` that reaches the node at pointer `target`."""
        base = self.res.bases.get(target, self.res.root_doc)
        start = self.res.ids.get(base, "") if base else ""
        frag = urllib.parse.quote(target[len(start) :], safe="/~!$&'()*+,;=:@-._")
        if base:
            return {"$ref": f"{base}#{frag}"}
        if self.res.bases.get(at, self.res.root_doc):
            raise self.error(
                "cannot point at a subschema of a root without $id from inside a resource with its own $id",
                at,
                keyword,
            )
        return {"$ref": f"#{frag}"}

    # ------------------------------------------------------------ choices

    def choices(self, node: Any, ptr: str, kind: str, at: str, chain: tuple = ()) -> list[Choice]:
        """The choices of `node` (at `ptr`) for `kind` ("properties" or "items"); conditions
        are written to be placed at `at`."""
        if not isinstance(node, dict):
            return [Choice()]
        if ptr in chain or len(chain) > 32:
            raise self.error("unevaluated*: the in-place subschemas recurse", ptr, KEYWORDS[kind == "items"])
        chain = chain + (ptr,)
        kw = "unevaluatedProperties" if kind == "properties" else "unevaluatedItems"
        ev = _own(node, ptr, kind)
        out = [Choice(frozenset(), ev)]
        if ev.all_props if kind == "properties" else ev.all_items:
            return out
        if "$dynamicRef" in node or "$recursiveRef" in node:
            raise self.error(f"{kw} beside a $dynamicRef that may evaluate more is not enforced", ptr, kw)

        def sub(x: Any, p: str) -> list[Choice]:
            return self.choices(x, p, kind, at, chain)

        def cond(p: str) -> str:
            return json.dumps(self.ref_to(p, at, kw), sort_keys=True)

        if isinstance(node.get("$ref"), str):
            target, tptr = self.res.resolve(node["$ref"], ptr)
            out = self.product(out, sub(target, tptr), ptr, kw)
        for i, s in enumerate(node.get("allOf") or []):
            out = self.product(out, sub(s, f"{ptr}/allOf/{i}"), ptr, kw)
        if isinstance(node.get("anyOf"), list):
            per = []
            for i, s in enumerate(node["anyOf"]):
                p = f"{ptr}/anyOf/{i}"
                cs = [c for c in sub(s, p) if not c.ev.empty(kind)]
                if cs:
                    per.append([Choice(c.conds | {cond(p)}, c.ev) for c in cs])
            alts: list[Choice] = []
            for r in range(0, len(per) + 1):
                for combo in itertools.combinations(per, r):
                    acc = [Choice()]
                    for cs in combo:
                        acc = self.product(acc, cs, ptr, kw)
                    alts += acc
                    if len(alts) > MAX_CHOICES:
                        raise self.error(
                            f"{kw}: anyOf has more than {MAX_CHOICES:,} combinations of branches (the limit)", ptr, kw
                        )
            out = self.product(out, alts, ptr, kw)
        if isinstance(node.get("oneOf"), list):
            alts = [Choice()]
            for i, s in enumerate(node["oneOf"]):
                p = f"{ptr}/oneOf/{i}"
                alts += [Choice(c.conds | {cond(p)}, c.ev) for c in sub(s, p) if not c.ev.empty(kind)]
            out = self.product(out, alts, ptr, kw)
        if "if" in node:
            p_if = f"{ptr}/if"
            held = self.product(sub(node["if"], p_if), sub(node.get("then", True), f"{ptr}/then"), ptr, kw)
            alts = [Choice()] + [Choice(c.conds | {cond(p_if)}, c.ev) for c in held if not c.ev.empty(kind)]
            not_if = json.dumps({"not": self.ref_to(p_if, at, kw)}, sort_keys=True)
            alts += [
                Choice(c.conds | {not_if}, c.ev)
                for c in sub(node.get("else", True), f"{ptr}/else")
                if not c.ev.empty(kind)
            ]
            out = self.product(out, alts, ptr, kw)
        if isinstance(node.get("dependentSchemas"), dict):
            for name, s in node["dependentSchemas"].items():
                p = f"{ptr}/dependentSchemas/{pointer_token(name)}"
                present = json.dumps({"type": "object", "required": [name]}, sort_keys=True)  # (objects only)
                alts = [Choice()] + [Choice(c.conds | {present}, c.ev) for c in sub(s, p) if not c.ev.empty(kind)]
                out = self.product(out, alts, ptr, kw)
        return out

    def product(self, a: list[Choice], b: list[Choice], ptr: str, kw: str) -> list[Choice]:
        got = _minimal([x & y for x in a for y in b])
        if len(got) > MAX_CHOICES:
            raise self.error(f"{kw}: more than {MAX_CHOICES} ways of evaluating (the limit)", ptr, kw)
        return got

    # ------------------------------------------------------------ the rewrite

    def rewrite(self) -> Any:
        edits: list[tuple[str, dict]] = []  # (pointer of a node, what it gets)
        self._collect(self.root, "", edits)
        if not edits:
            return self.root
        out = copy.deepcopy(self.root)
        for ptr, extra in edits:
            node = node_at(out, ptr)
            for k in KEYWORDS:
                node.pop(k, None)
            if extra:
                node["allOf"] = list(node.get("allOf") or []) + extra
        return out

    def _collect(self, node: Any, ptr: str, edits: list) -> None:
        if isinstance(node, dict):
            present = [k for k in KEYWORDS if k in node]
            if present:
                extra = []
                for k in present:
                    kind = "properties" if k == "unevaluatedProperties" else "items"
                    where = f"{ptr}/allOf/{len(node.get('allOf') or []) + len(extra)}"
                    try:
                        r = self.constraint(node, ptr, kind, node[k], where)
                    except SchemaError as e:
                        if self.dropped is None:
                            raise
                        self.dropped.append(
                            (e.pointer, f"{self.source}: at {e.pointer}: {e.reason}; ignored (lenient)")
                        )
                        r = True
                    if r is not True:
                        extra.append(r)
                edits.append((ptr, extra))
            for k, v in node.items():
                if k not in ("enum", "const", "default", "examples", "example"):
                    self._collect(v, f"{ptr}/{pointer_token(k)}", edits)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._collect(v, f"{ptr}/{i}", edits)

    def constraint(self, node: dict, ptr: str, kind: str, u: Any, at: str) -> Any:
        """The schema that replaces `node`'s unevaluated keyword of `kind` (placed at `at`)."""
        if u is True:
            return True
        own = {k: v for k, v in node.items() if k not in KEYWORDS}
        cs = self.choices(own, ptr, kind, at)
        branches = []
        for c in cs:
            r = _restriction(c.ev, kind, u, lambda p: self.ref_to(p, at, "unevaluatedItems"))
            parts = [json.loads(t) for t in sorted(c.conds)] + ([] if r is True else [r])
            if not parts:
                return True  # a choice without conditions that leaves nothing unevaluated
            branches.append(parts[0] if len(parts) == 1 else {"allOf": parts})
        return branches[0] if len(branches) == 1 else {"anyOf": branches}


def _own(node: dict, ptr: str, kind: str) -> Evaluated:
    """What `node`'s own keywords evaluate."""
    if kind == "properties":
        props = node.get("properties")
        pats = node.get("patternProperties")
        return Evaluated(
            names=frozenset(props) if isinstance(props, dict) else frozenset(),
            patterns=frozenset(pats) if isinstance(pats, dict) else frozenset(),
            all_props="additionalProperties" in node or "unevaluatedProperties" in node,
        )
    prefix = node.get("prefixItems")
    items = node.get("items")
    n = len(prefix) if isinstance(prefix, list) else 0
    every = "unevaluatedItems" in node or ("items" in node and not isinstance(items, list))
    if isinstance(items, list):  # draft-07's tuple form
        n = max(n, len(items))
        every = every or "additionalItems" in node
    contains = frozenset({f"{ptr}/contains"}) if "contains" in node else frozenset()
    return Evaluated(prefix=n, all_items=every, contains=contains)


def _minimal(cs: list[Choice]) -> list[Choice]:
    """Without the choices another makes redundant (fewer conditions, evaluating as much)."""
    out: list[Choice] = []
    for c in sorted(set(cs), key=lambda c: (len(c.conds), sorted(c.conds))):
        if not any(o.conds <= c.conds and o.ev.covers(c.ev, "properties") and o.ev.covers(c.ev, "items") for o in out):
            out.append(c)
    return out


def _restriction(ev: Evaluated, kind: str, u: Any, ref: Callable[[str], dict]) -> Any:
    """`u` applied to what `ev` leaves unevaluated, as a schema."""
    if kind == "properties":
        if ev.all_props:
            return True
        r: dict = {}
        if ev.names:
            r["properties"] = {n: True for n in sorted(ev.names)}
        if ev.patterns:
            r["patternProperties"] = {p: True for p in sorted(ev.patterns)}
        r["additionalProperties"] = u
        return r
    if ev.all_items:
        return True
    r = {}
    if ev.prefix:
        r["prefixItems"] = [True] * ev.prefix
    contains = [ref(c) for c in sorted(ev.contains)]
    r["items"] = u if not contains else {"anyOf": [*contains, u]}
    return r


def without_unevaluated(schema: Any, source: str = "<schema>", dropped: list[tuple[str, str]] | None = None) -> Any:
    """`schema` with every `unevaluatedProperties` / `unevaluatedItems` rewritten to plain
    keywords (the same instances are valid); SchemaError by pointer where it cannot be,
    or, given a `dropped` list (lenient), that keyword dropped and (pointer, warning) added."""
    if not _mentions(schema):
        return schema
    return Rewriter(schema, source, dropped).rewrite()


def _mentions(x: Any) -> bool:
    if isinstance(x, dict):
        return any(k in x for k in KEYWORDS) or any(_mentions(v) for v in x.values())
    if isinstance(x, list):
        return any(_mentions(v) for v in x)
    return False
