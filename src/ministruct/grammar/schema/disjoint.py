"""Can two JSON Schemas accept the same instance? A sufficient test, behind exact `oneOf`.

`oneOf` is compiled as a plain union, which is exact only when no instance satisfies two
branches. `disjoint` answers True only with a proof: per JSON type both branches allow,
some keyword pair excludes every instance of that type (enum/const values, numeric
bounds, length and count bounds, a property one branch requires and the other forbids,
a property both require whose schemas are disjoint, a first array item both require).
Values listed by `enum`/`const` are checked against the other branch with the
`jsonschema` validator (formats asserted, as ministruct enforces them).
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Callable, Iterator, Optional

from ministruct.errors import MinistructError
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.kinds import ALL_TYPES
from ministruct.grammar.schema.merge import PATTERNS, MergeError, Resolver, merge_all, schema_types

MAX_DEPTH = 8
MAX_APART_STATES = 2_000  # the joint DFA of two branches' patterns (past it: not proven apart)
MAX_APART_WORK = 100_000
MAX_LISTED_BRANCHES = 16  # an anyOf/oneOf branch compared branch by branch (at the top two levels)
MAX_SPREAD = 500  # such branches compared in one document (past it: not proven)
MAX_STEPS = 200  # subschema pairs compared to prove two branches disjoint (past it: not proven)
_NUMERIC = ("number", "integer")


class Disjointness:
    """The disjointness test for one schema document."""

    def __init__(self, resolver: Resolver, validator: Callable[[], Any]) -> None:
        self.resolver = resolver
        self._validator = validator  # the document's jsonschema validator, built on first use
        # `$ref`s are followed here from the document's base; with nested `$id`s a ref's
        # meaning depends on where it sits, so then none is followed (fewer proofs, none wrong)
        self._one_base = len(set(resolver.bases.values())) <= 1
        self._apart_cache: dict[tuple[str, ...], bool] = {}
        self._folded: dict[int, tuple[Any, Any]] = {}  # _normal's answers, by the schema object
        self._spread_left = MAX_SPREAD  # branches of anyOf/oneOf branches compared one by one
        self._steps = 0  # subschema pairs compared for one pair of branches (MAX_STEPS)

    def first_overlap(self, branches: list, rest: dict) -> Optional[tuple[int, int]]:
        """The first pair (i, j) of branches not proven disjoint, or None when all are.

        Branches that list their values (`const`/`enum`), and object branches that all
        require one property with listed values (a discriminator), are told apart in one
        pass; only the remaining pairs are compared one by one.
        """
        return next(self._overlaps(branches, rest), None)

    def overlaps(self, branches: list, rest: dict) -> set[tuple[int, int]]:
        """Every pair (i, j), i < j, of branches not proven disjoint."""
        return set(self._overlaps(branches, rest))

    def _overlaps(self, branches: list, rest: dict) -> Iterator[tuple[int, int]]:
        apart: set[tuple[int, int]] = set()
        for group in (self._by_values(branches), self._by_discriminator(branches, rest)):
            apart |= {(i, j) for i in group for j in group if i < j}
        for i in range(len(branches)):
            for j in range(i + 1, len(branches)):
                if (i, j) not in apart and not self.disjoint(branches[i], branches[j], rest):
                    yield i, j

    def _by_values(self, branches: list) -> list[int]:
        """Branches listing their values, when no value is listed by two of them."""
        idx = [i for i, b in enumerate(branches) if isinstance(b, dict) and _values(b) is not None]
        owner: dict[str, int] = {}
        ok = all(owner.setdefault(canonical(v), i) == i for i in idx for v in _values(branches[i]) or ())
        return idx if ok and len(idx) > 1 else []

    def _by_discriminator(self, branches: list, rest: dict) -> list[int]:
        """Object-only branches that require one shared property with distinct listed values."""
        tags: dict[int, dict[str, list]] = {}
        for i, b in enumerate(branches):
            b = self._normal(b)
            if not isinstance(b, dict) or self._types(b, 0) - {"object"}:
                continue
            props = b.get("properties") if isinstance(b.get("properties"), dict) else {}
            found = {}
            for p in _required(b) | _required(rest):
                sub = self._normal(props.get(p))
                vals = _values(sub) if isinstance(sub, dict) else None
                if vals is not None:
                    found[p] = vals
            if found:
                tags[i] = found
        if len(tags) < 2:
            return []
        for p in set.intersection(*(set(t) for t in tags.values())):
            owner: dict[str, int] = {}
            if all(owner.setdefault(canonical(v), i) == i for i, t in tags.items() for v in t[p]):
                return list(tags)
        return []

    def tag(self, branches: list, rest: dict) -> Optional[str]:
        """A property every branch gives distinct listed values (objects only), required or
        not: with it required, no two branches share an instance. One branch may instead
        exclude the values (`not: {enum}`) every other branch lists (the others' catch-all).
        None when there is none."""
        tags: list[dict[str, tuple[bool, list]]] = []  # name -> (listed: True, excluded: False; values)
        for b in branches:
            b = self._normal({"allOf": [rest, b]} if any(k not in ANNOTATIONS for k in rest) else b)
            if not isinstance(b, dict) or self._types(b, 0) - {"object"}:
                return None
            props = b.get("properties") if isinstance(b.get("properties"), dict) else {}
            found = {}
            for p, sub in props.items():
                sub = self._normal(sub)
                vals = _values(sub) if isinstance(sub, dict) else None
                if vals:  # (none at all: the property can never be there)
                    found[p] = (True, vals)
                elif isinstance(sub, dict) and isinstance(sub.get("not"), dict) and _values(sub["not"]):
                    found[p] = (False, _values(sub["not"]))
            tags.append(found)
        if len(tags) < 2:
            return None
        for p in sorted(set.intersection(*(set(t) for t in tags))):
            owner: dict[str, int] = {}
            listed = [(i, t[p][1]) for i, t in enumerate(tags) if t[p][0]]
            others = [{canonical(v) for v in t[p][1]} for t in tags if not t[p][0]]
            if len(others) > 1 or not all(owner.setdefault(canonical(v), i) == i for i, vs in listed for v in vs):
                continue
            if not others or set(owner) <= others[0]:
                return p
        return None

    def disjoint(self, a: Any, b: Any, rest: dict) -> bool:
        """True when no instance satisfies `rest` and both `a` and `b` (False: not proven)."""
        if any(k not in ANNOTATIONS for k in rest):
            a, b = {"allOf": [rest, a]}, {"allOf": [rest, b]}
        self._steps = 0
        return self._disjoint(a, b, 0)

    # ------------------------------------------------------------ the test

    def _normal(self, s: Any) -> Any:
        """`s` with `$ref` and `allOf` folded in (unchanged when that cannot be done exactly)."""
        if isinstance(s, dict) and ("$ref" in s or "allOf" in s) and self._one_base:
            got = self._folded.get(id(s))
            if got is not None and got[0] is s:
                return got[1]
            try:
                out = merge_all(s, "", self.resolver)
            except (MergeError, MinistructError):  # a failed fold only weakens the test
                out = s
            self._folded[id(s)] = (s, out)  # (s kept: its id is not reused while it is here)
            return out
        return s

    def _disjoint(self, a: Any, b: Any, depth: int) -> bool:
        a, b = self._normal(a), self._normal(b)  # (booleans pass through unchanged)
        if a is False or b is False:
            return True
        self._steps += 1
        if depth > MAX_DEPTH or self._steps > MAX_STEPS or not isinstance(a, dict) or not isinstance(b, dict):
            return False
        va, vb = _values(a), _values(b)
        if va is not None and not any(self._valid(v, b) for v in va):
            return True
        if vb is not None and not any(self._valid(v, a) for v in vb):
            return True
        if va is not None or vb is not None:
            return False  # some listed value satisfies both (or could not be checked)
        for x, y in ((a, b), (b, a)):  # (a oneOf holds where some branch does, as an anyOf)
            lists = [kw for kw in ("anyOf", "oneOf") if isinstance(x.get(kw), list) and x[kw]]
            if len(lists) == 1 and depth < 2 and len(x[lists[0]]) <= min(MAX_LISTED_BRANCHES, self._spread_left):
                self._spread_left -= len(x[lists[0]])
                rest = {k: v for k, v in x.items() if k != lists[0] and k not in ANNOTATIONS}
                return all(self._disjoint({"allOf": [rest, sub]} if rest else sub, y, depth + 1) for sub in x[lists[0]])
        shared = self._types(a, 0) & self._types(b, 0)
        return all(self._disjoint_as(t, a, b, depth) for t in shared)

    def _types(self, s: Any, depth: int) -> set[str]:
        """The JSON types `s` may accept ("integer" within "number"), through `$ref` and `allOf`."""
        if s is False:
            return set()
        if not isinstance(s, dict) or depth > MAX_DEPTH:
            return set(ALL_TYPES)
        try:
            t = schema_types(s, "", _raise)
        except _Unknown:
            t = set(ALL_TYPES)
        if isinstance(s.get("$ref"), str) and self._one_base:
            try:
                t &= self._types(self.resolver.resolve(s["$ref"], "")[0], depth + 1)
            except MinistructError:
                pass
        for sub in s.get("allOf") if isinstance(s.get("allOf"), list) else ():
            t &= self._types(sub, depth + 1)
        if "number" in t:
            t.add("integer")
        return t

    def _disjoint_as(self, t: str, a: dict, b: dict, depth: int) -> bool:
        """No instance of JSON type `t` satisfies both `a` and `b`."""
        if t in _NUMERIC:
            return _empty_interval(_bounds(a), _bounds(b), t == "integer")
        if t == "string":
            if _apart(_count(a, "minLength", "maxLength"), _count(b, "minLength", "maxLength")):
                return True
            pa, pb = _patterns(a), _patterns(b)
            return bool(pa and pb) and self._patterns_apart(pa + pb)
        if t == "array":
            if _apart(_count(a, "minItems", "maxItems"), _count(b, "minItems", "maxItems")):
                return True
            if _min(a, "minItems") >= 1 and _min(b, "minItems") >= 1:
                return self._disjoint(_first_item(a), _first_item(b), depth + 1)
            return False
        if t == "object":
            return self._objects_disjoint(a, b, depth)
        return False  # null and boolean: only enum/const tell instances apart

    def _least_names(self, s: Any, depth: int) -> int:
        """The fewest properties an object valid against `s` has: minProperties, the names
        it requires, and through `anyOf`/`oneOf` the fewest of any branch (with `s` around it)."""
        s = self._normal(s)
        if not isinstance(s, dict):
            return 0
        least = max(_min(s, "minProperties"), len(_required(s)))
        if depth > MAX_DEPTH:
            return least
        for kw in ("anyOf", "oneOf"):
            subs = s.get(kw)
            if isinstance(subs, list) and subs:
                rest = {k: v for k, v in s.items() if k not in ("anyOf", "oneOf")}
                least = max(least, min(self._least_names({"allOf": [rest, x]}, depth + 1) for x in subs))
        return least

    def _patterns_apart(self, patterns: list[str]) -> bool:
        """Is there no string in which every one of `patterns` is found? (One DFA for all
        of them, searched as the compiler reads them; False when it cannot be built small.)"""
        key = tuple(patterns)
        if key not in self._apart_cache:
            self._apart_cache[key] = _no_common_string(patterns)
        return self._apart_cache[key]

    def _objects_disjoint(self, a: dict, b: dict, depth: int) -> bool:
        ca, cb = _count(a, "minProperties", "maxProperties"), _count(b, "minProperties", "maxProperties")
        if _apart((self._least_names(a, depth), ca[1]), (self._least_names(b, depth), cb[1])):
            return True
        ra, rb = _required(a), _required(b)
        if any(_forbids(b, p) for p in ra) or any(_forbids(a, p) for p in rb):
            return True
        if max(self._least_names(a, depth), self._least_names(b, depth)) >= 1 and self._names_apart(a, b):
            return True  # (an object of both has a name both allow)
        return any(self._disjoint(_property(a, p), _property(b, p), depth + 1) for p in ra & rb)

    def _names_apart(self, a: dict, b: dict) -> bool:
        """Do `a` and `b` allow no property name in common? (Both closed by
        `additionalProperties: false`: their listed names and the names their patterns find.)"""
        if a.get("additionalProperties") is not False or b.get("additionalProperties") is not False:
            return False
        pa, pb = a.get("patternProperties") or {}, b.get("patternProperties") or {}
        if not isinstance(pa, dict) or not isinstance(pb, dict):
            return False
        for x, y in ((a, b), (b, a)):
            props = x.get("properties") if isinstance(x.get("properties"), dict) else {}
            if not all(props[n] is False or _forbids(y, n) for n in props):
                return False
        return all(self._patterns_apart([p, q]) for p in pa for q in pb)

    def _valid(self, value: Any, schema: dict) -> bool:
        """Does `value` satisfy `schema`? (True when the validator cannot tell.)"""
        if not self._one_base:
            return True
        try:
            return bool(self._validator().evolve(schema=schema).is_valid(value))
        except Exception:  # noqa: BLE001 - an unreadable schema proves nothing
            return True


class _Unknown(Exception):
    pass


def _raise(*_: Any) -> Exception:
    return _Unknown()


def _values(s: dict) -> Optional[list]:
    if "const" in s:
        return [s["const"]]
    if isinstance(s.get("enum"), list):
        return s["enum"]
    return None


def canonical(v: Any) -> str:
    """One text per JSON value (1 and 1.0 are the same number; true is not 1)."""
    if isinstance(v, float) and v.is_integer():
        v = int(v)
    if isinstance(v, list):
        return "[" + ",".join(canonical(x) for x in v) + "]"
    if isinstance(v, dict):
        return "{" + ",".join(json.dumps(k) + ":" + canonical(v[k]) for k in sorted(v)) + "}"
    return json.dumps(v)


def _number(x: Any) -> bool:
    return isinstance(x, (int, float)) and not isinstance(x, bool)


def _bounds(s: dict) -> tuple[float, bool, float, bool]:
    """(low, low excluded, high, high excluded) of the numbers `s` allows."""
    lo, lo_x, hi, hi_x = float("-inf"), False, float("inf"), False
    if _number(s.get("minimum")):
        lo = s["minimum"]
    if _number(s.get("exclusiveMinimum")) and s["exclusiveMinimum"] >= lo:
        lo, lo_x = s["exclusiveMinimum"], True
    if _number(s.get("maximum")):
        hi = s["maximum"]
    if _number(s.get("exclusiveMaximum")) and s["exclusiveMaximum"] <= hi:
        hi, hi_x = s["exclusiveMaximum"], True
    return lo, lo_x, hi, hi_x


def _empty_interval(a: tuple, b: tuple, integers: bool) -> bool:
    lo, lo_x = max((a[0], a[1]), (b[0], b[1]), key=lambda p: (p[0], p[1]))
    hi, hi_x = min((a[2], a[3]), (b[2], b[3]), key=lambda p: (p[0], not p[1]))
    if lo > hi or (lo == hi and (lo_x or hi_x)):
        return True
    if not integers or math.inf in (abs(lo), abs(hi)):  # (math.isfinite fails on huge ints)
        return False
    first = math.floor(lo) + 1 if lo_x or lo != math.floor(lo) else lo  # the smallest integer inside
    last = math.ceil(hi) - 1 if hi_x or hi != math.ceil(hi) else hi  # the largest
    return first > last


def _min(s: dict, key: str) -> int:
    v = s.get(key, 0)
    return v if isinstance(v, int) and not isinstance(v, bool) else 0


def _count(s: dict, lo: str, hi: str) -> tuple[int, float]:
    v = s.get(hi)
    return _min(s, lo), (v if isinstance(v, int) and not isinstance(v, bool) else float("inf"))


def _patterns(s: dict) -> list[str]:
    """The patterns a string must match under `s` (`pattern` and merged ones)."""
    out = [s["pattern"]] if isinstance(s.get("pattern"), str) else []
    more = s.get(PATTERNS)
    return out + [p for p in more if isinstance(p, str)] if isinstance(more, list) else out


def _no_common_string(patterns: list[str]) -> bool:
    """True when no string matches (re.search) every one of `patterns`: no state of their
    joint DFA (every state is reachable) accepts all of them. False when unsure."""
    from ministruct.grammar.regex.parse import parse_regex
    from ministruct.grammar.schema.complement import ComplementError, build_dfa, inline_rules
    from ministruct.grammar.schema.lookaheads import trailing_found
    from ministruct.grammar.schema.patterns import searched_regex

    try:
        comps = [inline_rules(parse_regex(searched_regex(trailing_found(p)))) for p in patterns]
        dfa = build_dfa(comps, max_states=MAX_APART_STATES, max_work=MAX_APART_WORK)
    except (MinistructError, ComplementError, RecursionError):
        return False
    every = frozenset(range(len(comps)))
    return not any(label >= every for label in dfa.labels)


def _apart(a: tuple, b: tuple) -> bool:
    return max(a[0], b[0]) > min(a[1], b[1])


def _required(s: dict) -> set[str]:
    r = s.get("required")
    return {p for p in r if isinstance(p, str)} if isinstance(r, list) else set()


def _forbids(s: dict, name: str) -> bool:
    """`s` rejects every object that has property `name`."""
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    if name in props:
        return props[name] is False
    if s.get("additionalProperties") is not False:
        return False
    pattern_props = s.get("patternProperties")
    if isinstance(pattern_props, dict) and pattern_props:
        try:  # (patterns are found as the validator and the compiler find them: re.search)
            return not any(re.search(p, name) for p in pattern_props)
        except (re.error, TypeError):
            return False
    return True


def _property(s: dict, name: str) -> Any:
    """The schema property `name` must satisfy in `s` (True when unconstrained or unsure)."""
    props = s.get("properties") if isinstance(s.get("properties"), dict) else {}
    if name in props:
        return props[name]
    if isinstance(s.get("patternProperties"), dict) and s["patternProperties"]:
        return True
    extra = s.get("additionalProperties", True)
    return extra if isinstance(extra, (dict, bool)) else True


def _first_item(s: dict) -> Any:
    prefix = s.get("prefixItems")
    if isinstance(prefix, list) and prefix:
        return prefix[0]
    items = s.get("items", True)
    if isinstance(items, list):
        return items[0] if items else s.get("additionalItems", True)
    return items if isinstance(items, (dict, bool)) else True
