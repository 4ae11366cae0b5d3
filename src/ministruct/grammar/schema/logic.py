"""Boolean structure of JSON Schema as unions: `not`, `if`/`then`/`else`, schema-valued
`dependencies`/`dependentSchemas` and exactly-one `oneOf`, each rewritten to `anyOf`.

`negate(S)` is a list of schemas whose union is the set of JSON values that fail S,
within the value kinds the surrounding schema allows (`Context`): one branch per way
of failing (a type S does not allow, a bound crossed, a required name absent, a
property whose value fails its schema, a listed value hit, ...). A `not` inside a
branch (a property's value, an item) is left for the compiler to rewrite where it is
compiled; `not` of listed values or of patterns stays as it is (the compiler
enforces those directly, `native_not`).

Where objects may carry unlisted names, a failing `patternProperties` or `propertyNames:
{not: {pattern}}` is a WITNESSES branch (some property whose name a pattern finds has a
value in a schema); other such failures (`additionalProperties`, ...) name only listed
properties: exact in closed objects, else a subset (a restriction, never a loosening).
A keyword whose failures cannot be written is a LogicLimit; so is a union past MAX_BRANCHES.
"""

from __future__ import annotations

import itertools
import re
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Callable, Iterator, Optional

from ministruct.errors import MinistructError
from ministruct.grammar.schema.disjoint import canonical
from ministruct.grammar.schema.formats import KNOWN_UNSUPPORTED, SUPPORTED_FORMATS
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.kinds import KINDS, NUMERIC, kinds_of, typed
from ministruct.grammar.schema.lookaheads import failing_pattern, read_lookaheads, split_lookaheads
from ministruct.grammar.schema.merge import (
    CONDITIONS,
    CONTAINS,
    KEY_PARTS,
    NOT_MULTIPLE_OF,
    PATTERNS,
    WITNESSES,
    MergeError,
    Resolver,
    merge_all,
)
from ministruct.grammar.schema.pattern_keys import name_pattern
from ministruct.grammar.schema.presence import (
    entailed,
    facts_of,
    fold_presence,
    pure_values,
    unequal,
    written_key,
)

MAX_BRANCHES = 128  # branches of one rewritten union (each is compiled as a schema of its own)
MAX_NEGATION_DEPTH = 12  # `not` through `$ref`s and nested negations
_CONDITIONALS = ("if", "then", "else")
# keywords through which a schema's objects may carry names its `properties` and `required`
# do not list (its objects are not closed over those names)
_NAMING = frozenset(
    {"anyOf", "oneOf", "allOf", "not", "if", "then", "else", CONDITIONS, "$ref", "$dynamicRef", "enum", "const"}
    | {"dependentSchemas", "dependencies", "dependentRequired", "unevaluatedProperties", "patternProperties"}
    | {WITNESSES, KEY_PARTS}
)


class LogicLimit(Exception):
    """A rewrite that cannot be done (exactly, or within the limits): keyword, pointer, why."""

    def __init__(self, keyword: str, pointer: str, why: str) -> None:
        super().__init__(why)
        self.keyword, self.pointer, self.why = keyword, pointer, why


@contextmanager
def _as(keyword: str) -> Iterator[None]:
    """LogicLimits raised inside are about `keyword` (the construct being rewritten)."""
    try:
        yield
    except LogicLimit as e:
        if e.keyword == keyword:
            raise
        raise LogicLimit(keyword, e.pointer, e.why) from None


@dataclass
class Excluded:
    """What a native `not` forbids: strings matching `patterns`, the listed `values`, and,
    when `strings_only`, every value that is not a string (`not: {pattern: P}` holds for
    strings only: `pattern` alone is true of every other value)."""

    patterns: list[str]
    values: list
    strings_only: bool = False


def native_not(sub: Any) -> Optional[Excluded]:
    """What `not: sub` forbids when it only names patterns and listed values (also through
    `anyOf`): the compiler enforces those directly."""
    out = Excluded([], [])
    stack = [sub]
    while stack:
        s = stack.pop()
        if not isinstance(s, dict):
            return None
        keys = {k for k in s if k not in ANNOTATIONS}
        if keys == {"anyOf"} and isinstance(s["anyOf"], list) and s["anyOf"]:
            stack.extend(s["anyOf"])
        elif (
            isinstance(s.get("pattern"), str)
            and keys <= {"pattern", "type"}
            and s.get("type", "string") == "string"
            and split_lookaheads(s["pattern"]) is None  # (else: negated as three patterns)
        ):
            out.patterns.append(s["pattern"])
            out.strings_only = out.strings_only or "type" not in s
        elif keys == {"enum"} and isinstance(s["enum"], list) and not any(map(_deep, s["enum"])):
            out.values.extend(s["enum"])
        elif keys == {"const"} and not _deep(s["const"]):
            out.values.append(s["const"])
        else:
            return None
    return out


def _deep(v: Any) -> bool:
    """A listed value with members (`not` of it is negated member by member, presence.unequal)."""
    return isinstance(v, (dict, list)) and bool(v)


@dataclass
class Context:
    """What the schema around a negation allows: value kinds, the property names its
    objects list, and whether they may carry others."""

    kinds: frozenset[str]
    names: tuple[str, ...] = ()
    closed: bool = False  # objects carry only `names`

    @classmethod
    def of(cls, node: dict, explicit: bool) -> "Context":
        """The context of objects compiled from `node` (a merged schema object): `closed`
        only where no keyword of it can add a name to its objects."""
        props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
        req = node.get("required") if isinstance(node.get("required"), list) else []
        names = tuple(dict.fromkeys([*props, *(r for r in req if isinstance(r, str))]))
        pp = node.get("patternProperties") or {}
        ap = node.get("additionalProperties", None if explicit and (props or req or pp) else True)
        # additionalProperties false: every valid object's names are listed, whatever else
        # the node says; the explicit policy's closure holds where nothing else adds names
        closed = not pp and (ap is False or (ap is None and not set(node) & _NAMING))
        if ap is None and _count(node.get("minProperties", 0)) > len(names):
            closed = False  # (objects_expr then takes further names from additionalProperties)
        return cls(kinds_of(node), names, closed)


class Logic:
    """Rewrites for one schema document (its resolver, its extra-properties policy)."""

    def __init__(self, resolver: Resolver, explicit: bool, is_valid: Callable[[Any, Any], bool]) -> None:
        self.resolver, self.explicit, self.is_valid = resolver, explicit, is_valid

    # ------------------------------------------------------------ unions

    def product(
        self,
        disjunctions: list[list[Any]],
        keyword: str,
        ptr: str,
        base: Any = True,
        closed: Optional[frozenset[str]] = None,
    ) -> list[Any]:
        """The union of every conjunction taking one schema from each list, at most
        MAX_BRANCHES of them. Conjunctions that cannot hold (with `base`, which they are
        compiled beside) are dropped as it goes: kinds that do not meet, and objects whose
        properties would have to be present and absent, or take a value allowed by one
        part and excluded by another (a discriminator's cases). `closed`: the only names
        the objects of `base` carry (others are absent), or None."""
        combos: list[tuple[frozenset[str], list, dict]] = [(kinds_of(base), [], facts_of(base, {}))]
        for options in disjunctions:
            nxt = []
            keys = [written_key(o) for o in options]
            for kinds, parts, facts in combos:
                if facts is not None and any(entailed(o, kinds, facts, closed) for o in options):
                    nxt.append((kinds, parts, facts))  # it holds already: the other options add nothing
                    continue
                if any(k is not None and k in map(written_key, parts) for k in keys):
                    nxt.append((kinds, parts, facts))  # one option is a part of the conjunction already
                    continue
                for o in options:
                    k = kinds & kinds_of(o)
                    if not k:
                        continue
                    f = facts_of(o, facts)
                    if f is not None and closed is not None and any(f[n][0] is True for n in f if n not in closed):
                        f = None  # (a name b's objects never carry)
                    if f is None:  # no object satisfies the parts: what is left are other kinds
                        k = k - {"object"}
                        t = typed(k)
                        if t is None:
                            continue
                        nxt.append((k, parts + [o, t], facts))
                    else:
                        nxt.append((k, parts + [o], f))
            if len(nxt) > MAX_BRANCHES:
                raise LogicLimit(keyword, ptr, f"needs more than {MAX_BRANCHES} branches (the limit)")
            combos = nxt
        return [True if not parts else parts[0] if len(parts) == 1 else {"allOf": parts} for _, parts, _ in combos]

    def rewrite(self, node: dict, ptr: str) -> Optional[dict]:
        """`node` with its `not` (unless native), `if`/`then`/`else` and schema-valued
        dependencies as one `anyOf` (its other keywords kept); None when it has none.
        A LogicLimit names the keyword it was rewriting."""
        conditions: list[list[Any]] = []
        rest = dict(node)
        changed = read_lookaheads(rest)
        kw = None
        listed = rest.pop(CONDITIONS, [])
        if "if" in rest:
            listed = [[rest.pop("if"), rest.pop("then", True), rest.pop("else", True)], *listed]
        rest.pop("then", None)
        rest.pop("else", None)
        for i, t, e in listed:
            with _as("if"):
                if i is True:
                    if t is not True:
                        conditions.append([t])
                elif t is not True or e is not True:
                    branches = [{"allOf": [i, t]}] if t is not False else []
                    if e is not False:
                        ctx = Context.of(rest, self.explicit)
                        branches += [{"allOf": [n, e]} for n in self.negate(i, ctx, f"{ptr}/if")]
                    conditions.append(branches)
                    kw = "if"
        deps = self._schema_dependencies(rest)
        for name, d in deps.items():
            conditions.append([{"properties": {name: False}}, {"type": "object", "required": [name], "allOf": [d]}])
            kw = kw or "dependentSchemas"
        if "not" in rest and native_not(rest["not"]) is None:
            sub = rest.pop("not")
            with _as("not"):
                conditions.append(self.negate(sub, Context.of(rest, self.explicit), f"{ptr}/not"))
            kw = kw or "not"
        if not conditions:
            return None if rest.keys() == node.keys() and not changed else rest
        with _as(kw or "not"):
            union = self.product(conditions, kw or "not", ptr, base=rest)
        return {**rest, "anyOf": union or [False]}

    def exactly_one(
        self, branches: list, rest: dict, pairs: set[tuple[int, int]], ptr: str, branch_ptrs: bool = True
    ) -> list:
        """`oneOf` as a union: branch i and not any branch it may overlap (`pairs`). What
        branch j shares with branch i (the same `$ref`, the same part of an `allOf`) holds
        beside branch i anyway: only j's other parts are negated. `branch_ptrs`: the
        branches are `ptr`/oneOf/i in the schema (False: a list a merge made; errors name `ptr`)."""
        out = []
        at = [f"{ptr}/oneOf/{j}" if branch_ptrs else ptr for j in range(len(branches))]
        parts = [self._parts(b) for b in branches]
        for i, b in enumerate(branches):
            others = [j for j in range(len(branches)) if j != i and (min(i, j), max(i, j)) in pairs]
            try:
                ctx = Context.of(merge_all({"allOf": [rest, b]}, ptr, self.resolver), self.explicit)
            except (MergeError, MinistructError):
                ctx = Context(KINDS)
            kept = [j for j in others if not self._misses_closed(ctx, branches[j], ptr)]
            closure: list = []
            if not kept:
                others = []  # (b is compiled as it is: closed, as ctx says)
            elif len(kept) < len(others):
                # the others b's closed objects fail stay failed where b's objects keep to its
                # names (a negation merged in could bring others: it is kept to them too)
                others = kept
                closure = [
                    {"type": "object", "properties": dict.fromkeys(ctx.names, True), "additionalProperties": False}
                ]
            if not others:
                out.append(b)
                continue
            mine = {k for k, _ in parts[i]}
            left = {j: [x for k, x in parts[j] if k not in mine] for j in others}
            if any(not xs for xs in left.values()):  # branch j holds wherever branch i does
                out.append(False)
                continue
            reduced = {j: xs[0] if len(xs) == 1 else {"allOf": xs} for j, xs in left.items()}
            with _as("oneOf"):
                union = self.product(
                    [self.negate(reduced[j], ctx, at[j]) for j in others],
                    "oneOf",
                    at[i],
                    base={"allOf": [rest, b, *closure]},
                    closed=frozenset(ctx.names) if closure else None,
                )
            out.append({"allOf": [b, {"anyOf": union or [False]}, *closure]})
        return out

    def _misses_closed(self, ctx: Context, other: Any, ptr: str) -> bool:
        """Does every value of a branch whose objects are closed (`ctx`: they carry only
        `ctx.names`, and only objects) fail `other`, which requires a name outside them?
        (The branch is then compiled as it is: what `ctx` was read from.)"""
        if not ctx.closed or ctx.kinds != frozenset({"object"}) or not isinstance(other, dict):
            return False
        try:
            node = merge_all(other, ptr, self.resolver)
        except (MergeError, MinistructError):
            return False
        req = node.get("required") if isinstance(node.get("required"), list) else []
        return any(isinstance(r, str) and r not in ctx.names for r in req)

    def _parts(self, s: Any, depth: int = 0) -> list[tuple[str, Any]]:
        """The conjuncts of a schema (through `allOf` and `$ref`), each with a key equal for
        equal schemas."""
        if isinstance(s, dict) and depth < MAX_NEGATION_DEPTH:
            keys = {k for k in s if k not in ANNOTATIONS}
            if keys == {"allOf"} and isinstance(s["allOf"], list):
                return [p for x in s["allOf"] for p in self._parts(x, depth + 1)]
            if keys == {"$ref"} and len(set(self.resolver.bases.values())) <= 1:
                try:
                    return self._parts(self.resolver.resolve(s["$ref"], "")[0], depth + 1)
                except MinistructError:
                    pass
            if "allOf" in keys and isinstance(s["allOf"], list):
                own = {k: v for k, v in s.items() if k != "allOf" and k not in ANNOTATIONS}
                return self._parts(own, depth + 1) + [p for x in s["allOf"] for p in self._parts(x, depth + 1)]
        try:
            return [(canonical(s), s)]
        except (TypeError, ValueError):
            return [(str(id(s)), s)]

    def _schema_dependencies(self, rest: dict) -> dict[str, Any]:
        """Pops the schema-valued dependencies (both spellings) from `rest`, merged per name."""
        out: dict[str, Any] = {}
        for k in ("dependentSchemas", "dependencies"):
            v = rest.get(k)
            if not isinstance(v, dict):
                continue
            schemas = {n: d for n, d in v.items() if not isinstance(d, list)}
            if not schemas:
                continue
            left = {n: d for n, d in v.items() if isinstance(d, list)}
            if left:
                rest[k] = left
            else:
                del rest[k]
            for n, d in schemas.items():
                if d is True or (isinstance(d, dict) and not set(d) - ANNOTATIONS):
                    continue
                out[n] = d if n not in out else {"allOf": [out[n], d]}
        return out

    # ------------------------------------------------------------ negation

    def negate(self, s: Any, ctx: Context, ptr: str, depth: int = 0) -> list[Any]:
        """Schemas whose union is every value of `ctx` that fails `s`."""
        if s is True:
            return []
        if s is False:
            t = typed(ctx.kinds)
            return [] if t is None else [t]
        if not isinstance(s, dict):
            raise LogicLimit("not", ptr, "applies to something that is not a schema")
        if depth > MAX_NEGATION_DEPTH:
            raise LogicLimit("not", ptr, f"nests negations deeper than {MAX_NEGATION_DEPTH} (a recursive not)")
        out: list[Any] = []
        own = kinds_of({k: v for k, v in s.items() if k == "type"})
        if "type" in s:
            t = typed(ctx.kinds - own)
            if t is not None:
                out.append(t)
        live = ctx.kinds & own
        if not live:
            return out
        inner = Context(live, ctx.names, ctx.closed)

        def add(**kw: Any) -> None:
            t = typed(live, **kw)
            if t is not None:
                out.append(t)

        def add_for(kinds: frozenset[str], **kw: Any) -> None:
            t = typed(live & kinds, **kw)
            if t is not None and live & kinds:
                out.append(t)

        for k, v in s.items():
            if k in ANNOTATIONS or k == "type":
                continue
            where = f"{ptr}/{k}"
            if k == "$ref":
                if len(set(self.resolver.bases.values())) > 1:  # where a ref sits decides its target
                    raise LogicLimit(
                        "not", where, "the negation of a $ref in a document with nested $id is not enforced"
                    )
                target, tptr = self.resolver.resolve(v, ptr)
                out += self.negate(target, inner, tptr, depth + 1)
            elif k == "allOf":
                for i, sub in enumerate(_list(v, where)):
                    out += self.negate(sub, inner, f"{where}/{i}", depth + 1)
            elif k == "anyOf":
                subs = _list(v, where)
                out += self.product(
                    [self.negate(sub, inner, f"{where}/{i}", depth + 1) for i, sub in enumerate(subs)], "not", where
                )
            elif k == "oneOf":
                subs = _list(v, where)
                out += self.product(
                    [self.negate(sub, inner, f"{where}/{i}", depth + 1) for i, sub in enumerate(subs)], "not", where
                )
                pairs = list(itertools.combinations(subs, 2))
                if len(pairs) > MAX_BRANCHES:
                    raise LogicLimit(
                        "not", where, f"the negation of a oneOf needs more than {MAX_BRANCHES} branches (the limit)"
                    )
                for a, b in pairs:
                    add(allOf=[a, b])
            elif k == "not":
                add(allOf=[v])
            elif k == "if":
                then, else_ = s.get("then", True), s.get("else", True)
                if then is not True:
                    add(allOf=[v, {"not": then}])
                if else_ is not True:
                    add(allOf=[{"not": v}, {"not": else_}])
            elif k in ("then", "else"):
                continue
            elif k == CONDITIONS:
                for i, then, else_ in v:
                    out += self.negate({"if": i, "then": then, "else": else_}, inner, ptr, depth + 1)
            elif k in ("enum", "const"):
                values = [v] if k == "const" else _list(v, where)
                deep = [x for x in values if _deep(x)]
                if not deep:
                    add(**{"not": {k: v}})
                    continue
                shallow = [x for x in values if not _deep(x)]
                lists = [unequal(x, live) for x in deep]
                if shallow:
                    t = typed(live, **{"not": {"enum": shallow}})
                    lists.append([] if t is None else [t])
                out += self.product(lists, "not", where)
            elif k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum"):
                if not _number(v):
                    raise LogicLimit("not", where, f"the negation of a {k} that is not a number is not enforced")
                flipped = {
                    "minimum": "exclusiveMaximum",
                    "maximum": "exclusiveMinimum",
                    "exclusiveMinimum": "maximum",
                    "exclusiveMaximum": "minimum",
                }[k]
                add_for(NUMERIC, **{flipped: v})
            elif k in ("minLength", "minItems", "minProperties"):
                kind = {"minLength": "string", "minItems": "array", "minProperties": "object"}[k]
                if _count(v) > 0:
                    add_for(frozenset({kind}), **{"max" + k[3:]: _count(v) - 1})
            elif k in ("maxLength", "maxItems", "maxProperties"):
                kind = {"maxLength": "string", "maxItems": "array", "maxProperties": "object"}[k]
                add_for(frozenset({kind}), **{"min" + k[3:]: _count(v) + 1})
            elif k == "pattern":
                for failing in failing_pattern(v):
                    add_for(frozenset({"string"}), **failing)
            elif k == "format":
                if v not in SUPPORTED_FORMATS and v not in KNOWN_UNSUPPORTED:
                    continue  # an unknown format is an annotation
                if "string" in live:
                    raise LogicLimit("not", where, f"the negation of format {v!r} is not enforced")
            elif k == "multipleOf":
                if not _number(v) or v <= 0:
                    raise LogicLimit("not", where, "multipleOf must be a positive number")
                add_for(NUMERIC, **{NOT_MULTIPLE_OF: [v]})
            elif k == PATTERNS:
                for pat in _list(v, where):
                    for failing in failing_pattern(pat):
                        add_for(frozenset({"string"}), **failing)
            elif k == NOT_MULTIPLE_OF:
                for m in _list(v, where):
                    add_for(NUMERIC, multipleOf=m)
            elif k == "required":
                for name in _list(v, where):
                    add_for(frozenset({"object"}), properties={name: False})
            elif k == "properties":
                if not isinstance(v, dict):
                    raise LogicLimit("not", where, "properties must be an object")
                for name, sub in v.items():
                    if sub is not True:
                        add_for(frozenset({"object"}), required=[name], properties={name: {"not": sub}})
            elif k in ("additionalProperties", "patternProperties", "propertyNames"):
                self._negate_names(k, v, s, inner, add_for, where)
            elif k in ("dependentRequired", "dependencies", "dependentSchemas"):
                if not isinstance(v, dict):
                    raise LogicLimit("not", where, f"{k} must be an object")
                for name, d in v.items():
                    if isinstance(d, list):
                        for x in d:
                            add_for(frozenset({"object"}), required=[name], properties={x: False})
                    elif d is not True:
                        add_for(frozenset({"object"}), required=[name], allOf=[{"not": d}])
            elif k == "prefixItems" or (k == "items" and isinstance(v, list)):
                for i, sub in enumerate(_list(v, where)):
                    if sub is not True:
                        add_for(frozenset({"array"}), minItems=i + 1, prefixItems=[True] * i + [{"not": sub}])
            elif k == "items":
                if v is True:
                    continue
                if "prefixItems" in s:
                    if "array" in live:
                        raise LogicLimit("not", where, "the negation of items after prefixItems is not enforced")
                    continue
                add_for(frozenset({"array"}), contains={"not": v})
            elif k in ("additionalItems",):
                if v is not True and "array" in live:
                    raise LogicLimit("not", where, f"the negation of {k} is not enforced")
            elif k == "contains":
                lo = s.get("minContains", 1)
                hi = s.get("maxContains")
                if _count(lo) >= 1:
                    add_for(frozenset({"array"}), items={"not": v})
                if _count(lo) > 1:
                    add_for(frozenset({"array"}), contains=v, minContains=1, maxContains=_count(lo) - 1)
                if hi is not None:
                    add_for(frozenset({"array"}), contains=v, minContains=_count(hi) + 1)
            elif k in ("minContains", "maxContains"):
                continue
            elif k == CONTAINS:
                for part in _list(v, where):
                    out += self.negate(part, inner, where, depth + 1)
            elif k == "uniqueItems":
                if v is True and "array" in live:
                    raise LogicLimit("not", where, "the negation of uniqueItems is not enforced")
            elif k == KEY_PARTS and "object" in live:
                raise LogicLimit("not", where, "the negation of merged patternProperties is not enforced")
            elif k in _KNOWN_ASSERTING:
                raise LogicLimit("not", where, f"the negation of {k} is not enforced")
        return fold_presence(out)

    def _negate_names(self, k: str, v: Any, s: dict, ctx: Context, add_for: Callable, where: str) -> None:
        """Failing additionalProperties / patternProperties / propertyNames: some property
        of the surrounding schema's names that falls under `k` with a value (or name) that
        fails; properties it does not name are not generated (see the module)."""
        if "object" not in ctx.kinds or v is True:
            return
        props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
        pp = s.get("patternProperties") if isinstance(s.get("patternProperties"), dict) else {}
        obj = frozenset({"object"})
        if k == "propertyNames":
            if v is False:  # every name fails: some property is there
                add_for(obj, minProperties=1)
                return
            # the names v excludes by listing them: one of them is there (exact, named or not)
            inner = v.get("not") if isinstance(v, dict) and set(v) - ANNOTATIONS == {"not"} else None
            for name in dict.fromkeys(x for x in pure_values(inner) or () if isinstance(x, str) and x not in ctx.names):
                add_for(obj, required=[name])
            if name_pattern(inner) is not None and not ctx.closed:  # some name, listed or not, that it finds
                return add_for(obj, **{WITNESSES: [[name_pattern(inner), True]]})
        elif k == "patternProperties" and not ctx.closed and all(isinstance(p, str) for p in pp):
            for p in (p for p in pp if pp[p] is not True):  # some name, listed or not, and its value
                add_for(obj, **{WITNESSES: [[p, {"not": pp[p]}]]})
            return
        for name in ctx.names:
            matched = [p for p in pp if _search(p, name, where)]
            if k == "propertyNames":
                if not self.is_valid(name, v):
                    add_for(obj, required=[name])
            elif k == "patternProperties":
                for p in matched:
                    if pp[p] is not True:
                        add_for(obj, required=[name], properties={name: {"not": pp[p]}})
            elif name not in props and not matched:
                add_for(obj, required=[name], properties={name: {"not": v}})


def _list(v: Any, where: str) -> list:
    if not isinstance(v, list):
        raise LogicLimit("not", where, "must be an array")
    return v


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _count(x: Any) -> int:
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    return x if isinstance(x, int) and not isinstance(x, bool) and x >= 0 else 0


def _search(pattern: str, name: str, where: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        raise LogicLimit("not", where, f"invalid pattern {pattern!r}") from None


_KNOWN_ASSERTING = frozenset(
    {
        "unevaluatedItems",
        "unevaluatedProperties",
        "$dynamicRef",
        "$recursiveRef",
    }
)
