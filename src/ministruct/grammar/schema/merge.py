"""JSON Schema plumbing for the schema front end: `$ref` resolution (JSON pointers,
`$id`, `$anchor`), exact `allOf`/`$ref`-with-siblings merging, and type sets.
"""

from __future__ import annotations

import json
import math
import re
import urllib.parse
from typing import Any, Callable, Optional

from ministruct.grammar.limits import pointer_key, pointer_token
from ministruct.grammar.schema.keywords import ANNOTATIONS
from ministruct.grammar.schema.kinds import ALL_TYPES, kinds_of

_NOT_SCHEMAS = {"enum", "const", "default", "examples", "example"}
MAX_PRODUCT = 64  # combinations of several anyOf/oneOf lists in one allOf
AMBIGUOUS: tuple = ("?",)  # Resolver.part_paths of a subschema merged in from two places
CONDITIONS = "$ministruct:conditions"  # [if, then, else] of merged parts (schema_logic rewrites them)
NOT_MULTIPLE_OF = "$ministruct:notMultipleOf"  # steps a number is not a multiple of (schema_multiples)
PATTERNS = "$ministruct:patterns"  # the patterns of merged parts besides `pattern` (a string matches all)
# the `contains` of merged parts besides the first, each {contains, minContains, maxContains} (schema_contains)
CONTAINS = "$ministruct:contains"
# [[pattern, schema], ...]: for each, some property whose name the pattern finds (re.search)
# has a value valid under the schema (what a failed patternProperties or propertyNames asks)
WITNESSES = "$ministruct:witnesses"
# [[patternProperties, additionalProperties], ...] of merged parts: a name not in the node's
# `properties` meets, for each pair, the schemas of the patterns that find it, or else the
# pair's additionalProperties (the parts' own patterns and extras, kept apart)
KEY_PARTS = "$ministruct:keyParts"
_COUNTS = ("contains", "minContains", "maxContains")


class MergeError(Exception):
    """A combination that cannot be merged exactly."""

    def __init__(self, message: str, pointer: str, keyword: Optional[str] = None) -> None:
        super().__init__(message)
        self.message, self.pointer, self.keyword = message, pointer, keyword


def schema_types(node: dict, ptr: str, error: Callable) -> set[str]:
    """The JSON types `node` allows by its `type` keyword ("integer" kept apart from "number")."""
    if "type" not in node:
        return set(ALL_TYPES)
    t = node["type"]
    names = [t] if isinstance(t, str) else t
    if not isinstance(names, list) or not all(isinstance(x, str) for x in names):
        raise error(f"type must be a string or an array of strings, not {json.dumps(t)}", f"{ptr}/type", "type")
    for x in names:
        if x not in ALL_TYPES:
            raise error(f"unknown type {x!r}", f"{ptr}/type", "type")
    out = set(names)
    if "number" in out:
        out.add("integer")
    return out


def node_at(root: Any, ptr: str) -> Any:
    """The node at JSON pointer `ptr` of `root` (KeyError, IndexError, ValueError, TypeError when none)."""
    node = root
    for tok in ptr.split("/")[1:]:
        tok = pointer_key(tok)
        node = node[int(tok)] if isinstance(node, list) else node[tok]
    return node


def join_uri(base: str, ref: str) -> str:
    """`ref` resolved against `base` (RFC 3986; a fragment alone also against a URN, which
    urllib's urljoin leaves as it is)."""
    if not base:
        return ref
    if ref.startswith("#") or ref == "":
        return urllib.parse.urldefrag(base)[0] + ref
    return urllib.parse.urljoin(base, ref)


class Resolver:
    """Finds `$ref` targets inside one schema document (no remote references)."""

    def __init__(self, root: Any, error: Callable) -> None:
        self.root, self.error = root, error
        # set: _flatten records, for each subschema of a part, the nodes passed to reach it
        # (their pointers as the merge saw them, and the nodes themselves)
        self.part_paths: Optional[dict[int, tuple]] = None
        # set: (a $dynamicRef, the path to it) -> (target, its pointer), or None where unknown
        self.dynamic_hook: Optional[Callable[[str, tuple], Optional[tuple[Any, str]]]] = None
        self.ids: dict[str, str] = {}
        self.anchors: dict[str, str] = {}
        self.bases: dict[str, str] = {}
        # draft-04 (and 03) spell $id `id`
        draft = root.get("$schema") if isinstance(root, dict) and isinstance(root.get("$schema"), str) else ""
        self.id_keys = ("$id", "id") if re.search(r"draft-0[34]/", draft) else ("$id",)
        base = next((root[k] for k in self.id_keys if isinstance(root, dict) and isinstance(root.get(k), str)), "")
        self.root_doc = urllib.parse.urldefrag(base)[0]
        self._scan(root, "", self.root_doc)

    def _scan(self, node: Any, ptr: str, base: str) -> None:
        if isinstance(node, dict):
            for k in self.id_keys:
                if isinstance(node.get(k), str):
                    if node[k].startswith("#"):  # `"$id": "#name"` (drafts 4-7): a plain-name anchor
                        if len(node[k]) > 1 and not node[k].startswith("#/"):
                            self.anchors.setdefault(f"{base}{node[k]}", ptr)
                    else:
                        base = urllib.parse.urldefrag(join_uri(base, node[k]))[0]
                        self.ids.setdefault(base, ptr)
                    break
            for k in ("$anchor", "$dynamicAnchor"):  # (a $ref reaches a $dynamicAnchor as a plain anchor)
                if isinstance(node.get(k), str):
                    self.anchors.setdefault(f"{base}#{node[k]}", ptr)
            self.bases[ptr] = base
            for k, v in node.items():
                if k not in _NOT_SCHEMAS:
                    self._scan(v, f"{ptr}/{pointer_token(k)}", base)
        elif isinstance(node, list):
            for i, v in enumerate(node):
                self._scan(v, f"{ptr}/{i}", base)

    def get(self, ptr: str) -> Any:
        return node_at(self.root, ptr)

    def resolve(self, ref: Any, ptr: str) -> tuple[Any, str]:
        """(target schema, its JSON pointer) for a `$ref` found in the node at `ptr`."""
        where = f"{ptr}/$ref"
        if not isinstance(ref, str):
            raise self.error("$ref must be a string", where, "$ref")
        base = self.bases.get(ptr, self.root_doc)
        full = join_uri(base, ref)
        doc, frag = urllib.parse.urldefrag(full)
        if doc == "" or doc == self.root_doc:
            start = ""
        elif doc in self.ids:
            start = self.ids[doc]
        else:
            raise self.error(
                f"remote $ref {ref!r} is not among the `documents` given (nothing is fetched from the network)",
                where,
                "$ref",
            )
        frag = urllib.parse.unquote(frag)
        if frag == "" or frag.startswith("/"):
            tptr = start + frag if frag else start
            try:
                for tok in frag.split("/")[1:]:
                    if tok.lstrip("-").isdigit() and tok.startswith("0") and len(tok) > 1:
                        raise KeyError(tok)
                target = self.get(tptr)
            except (KeyError, IndexError, ValueError, TypeError):
                raise self.error(f"$ref {ref!r} points nowhere", where, "$ref") from None
            return target, tptr
        key = f"{doc}#{frag}"
        if key not in self.anchors:
            raise self.error(f"$ref {ref!r} points nowhere (no such $anchor)", where, "$ref")
        return self.get(self.anchors[key]), self.anchors[key]


def _json_eq(x: Any, y: Any) -> bool:
    if isinstance(x, bool) or isinstance(y, bool):
        return type(x) is type(y) and x == y
    if isinstance(x, (int, float)) and isinstance(y, (int, float)):
        return x == y
    if isinstance(x, list) and isinstance(y, list):
        return len(x) == len(y) and all(_json_eq(a, b) for a, b in zip(x, y))
    if isinstance(x, dict) and isinstance(y, dict):
        return x.keys() == y.keys() and all(_json_eq(x[k], y[k]) for k in x)
    return type(x) is type(y) and x == y


# ------------------------------------------------------------ allOf merging

# (minContains/maxContains: merged only beside one and the same `contains`, see _combine)
_MAXES = {"minimum", "exclusiveMinimum", "minLength", "minItems", "minProperties", "minContains"}
_MINS = {"maximum", "exclusiveMaximum", "maxLength", "maxItems", "maxProperties", "maxContains"}
_SCHEMA_VALUED = {"propertyNames", "additionalItems", "unevaluatedItems", "unevaluatedProperties", "not"}
_OBJECT_SHAPE = ("properties", "additionalProperties", "patternProperties", KEY_PARTS)
_ARRAY_SHAPE = ("prefixItems", "items", "additionalItems")
# Keywords that constrain instances (draft 2020-12 and the draft 4-7 forms ministruct reads).
_ASSERTING = {
    "type",
    "enum",
    "const",
    "multipleOf",
    "maximum",
    "exclusiveMaximum",
    "minimum",
    "exclusiveMinimum",
    "maxLength",
    "minLength",
    "pattern",
    "format",
    "maxItems",
    "minItems",
    "uniqueItems",
    "maxContains",
    "minContains",
    "maxProperties",
    "minProperties",
    "required",
    "dependentRequired",
    "dependencies",
    "allOf",
    "anyOf",
    "oneOf",
    "not",
    "if",
    "then",
    "else",
    "dependentSchemas",
    "prefixItems",
    "items",
    "additionalItems",
    "contains",
    "properties",
    "patternProperties",
    "additionalProperties",
    "propertyNames",
    "unevaluatedItems",
    "unevaluatedProperties",
    "$ref",
    "$dynamicRef",
    "$recursiveRef",
    CONDITIONS,
    NOT_MULTIPLE_OF,
    PATTERNS,
    CONTAINS,
    WITNESSES,
    KEY_PARTS,
}


def _flatten(schema: Any, ptr: str, resolver: Resolver, chain: tuple[str, ...], out: list, path: tuple = ()) -> None:
    if schema is True:
        return
    if schema is False or not isinstance(schema, dict):
        out.append((schema, ptr))
        return
    own = {k: v for k, v in schema.items() if k not in ("allOf", "$ref")}
    path = path + ((ptr, schema),)
    dynamic = None  # a $dynamicRef among the parts, resolved in the scope of its path (the compiler's hook)
    if isinstance(schema.get("$dynamicRef"), str) and resolver.dynamic_hook is not None:
        dynamic = resolver.dynamic_hook(schema["$dynamicRef"], path)
        if dynamic is not None:
            del own["$dynamicRef"]
    out.append((own, ptr))
    if resolver.part_paths is not None:  # the nodes evaluation passed to reach this part's subschemas
        for v in own.values():
            for x in [v, *(v.values() if isinstance(v, dict) else v if isinstance(v, list) else ())]:
                if isinstance(x, (dict, list)) and resolver.part_paths.setdefault(id(x), path) != path:
                    resolver.part_paths[id(x)] = AMBIGUOUS  # reached by two ways: its scope is not one
    if "$ref" in schema:
        target, tptr = resolver.resolve(schema["$ref"], ptr)
        if tptr in chain:
            raise MergeError(
                f"$ref {schema['$ref']!r} recurses into itself inside allOf/$ref siblings", f"{ptr}/$ref", "$ref"
            )
        _flatten(target, tptr, resolver, chain + (tptr,), out, path)
    if dynamic is not None:
        target, tptr = dynamic
        if tptr in chain:
            raise MergeError("$dynamicRef recurses into itself inside allOf/$ref siblings", f"{ptr}/$dynamicRef")
        _flatten(target, tptr, resolver, chain + (tptr,), out, path)
    if "allOf" in schema:
        subs = schema["allOf"]
        if not isinstance(subs, list) or not subs:
            raise MergeError("allOf must be a non-empty array", f"{ptr}/allOf", "allOf")
        for i, s in enumerate(subs):
            _flatten(s, f"{ptr}/allOf/{i}", resolver, chain, out, path)


def merge_all(schema: dict, ptr: str, resolver: Resolver) -> dict:
    """One schema object equivalent to `schema` with its `allOf` and `$ref` folded in."""
    if "allOf" not in schema and "$ref" not in schema and "$dynamicRef" not in schema:
        return schema
    parts: list = []
    _flatten(schema, ptr, resolver, (), parts)
    for p, pptr in parts:
        if p is False:
            return {"enum": []}
        if not isinstance(p, dict):
            raise MergeError(f"a schema must be an object or a boolean, not {type(p).__name__}", pptr)
    parts = [(_conditional_listed(p), q) for p, q in parts]
    # minContains/maxContains count the `contains` of their own schema: without one they say nothing
    # (and with one, at least one match unless minContains says otherwise)
    parts = [
        (
            {"minContains": 1, **p}
            if "contains" in p
            else {k: v for k, v in p.items() if k not in ("minContains", "maxContains")},
            q,
        )
        for p, q in parts
    ]
    parts = [(p, q) for p, q in parts if any(k not in ANNOTATIONS for k in p)]
    if not parts:
        return {}
    if len(parts) == 1:
        return parts[0][0]
    out: dict = {}
    for p, pptr in parts:
        if "contains" in p and "contains" in out and not _json_eq(p["contains"], out["contains"]):
            # two things to contain are not one thing containing both: each keeps its counts
            out[CONTAINS] = [*out.get(CONTAINS, []), {k: p[k] for k in _COUNTS if k in p}]
            p = {k: v for k, v in p.items() if k not in _COUNTS}
        for k, v in p.items():
            if k in ANNOTATIONS or k in _OBJECT_SHAPE or k in _ARRAY_SHAPE:
                continue
            if k == "pattern" and k in out and out[k] != v and isinstance(v, str):
                if v not in out.get(PATTERNS, []):
                    out[PATTERNS] = [*out.get(PATTERNS, []), v]  # a string must match both
                continue
            out[k] = v if k not in out else _combine(k, out[k], v, pptr)
    shape = [(p, q) for p, q in parts if any(k in p for k in _OBJECT_SHAPE)]
    if len(shape) == 1:
        for k in _OBJECT_SHAPE:
            if k in shape[0][0]:
                out[k] = shape[0][0][k]
    elif shape:
        out.update(_merge_shapes(shape))
    arrays = [(p, q) for p, q in parts if any(k in p for k in _ARRAY_SHAPE)]
    if len(arrays) == 1:
        out.update({k: arrays[0][0][k] for k in _ARRAY_SHAPE if k in arrays[0][0]})
    elif arrays:
        out.update(_merge_arrays(arrays))
    return out


def _conditional_listed(p: dict) -> dict:
    """A part's `if`/`then`/`else` as one entry of CONDITIONS, so that the conditionals of
    several parts merge (each stays a conditional of its own); `then`/`else` without `if`
    dropped (they assert nothing)."""
    if not any(k in p for k in ("if", "then", "else")):
        return p
    out = {k: v for k, v in p.items() if k not in ("if", "then", "else")}
    if "if" in p:
        out[CONDITIONS] = [[p["if"], p.get("then", True), p.get("else", True)]]
    return out


def _merge_arrays(parts: list) -> dict:
    """Exact merge of prefixItems / items: position i gets every part's schema for i. The
    older form (`items` a list: the positions, `additionalItems` the rest; `additionalItems`
    says nothing beside any other `items`) is read as prefixItems / items first."""
    parts = [(_positional(p, q), q) for p, q in parts]
    for p, q in parts:
        if isinstance(p.get("items"), list) or "additionalItems" in p:
            raise MergeError("allOf: cannot merge array forms of items", q, "items")
        if not isinstance(p.get("prefixItems", []), list):
            raise MergeError("prefixItems must be an array", f"{q}/prefixItems", "prefixItems")
    n = max(len(p.get("prefixItems", [])) for p, _ in parts)
    prefix = []
    for i in range(n):
        subs = [p["prefixItems"][i] if i < len(p.get("prefixItems", [])) else p.get("items", True) for p, _ in parts]
        subs = [x for x in subs if x is not True]
        prefix.append(True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs})
    items = [p.get("items", True) for p, _ in parts if p.get("items", True) is not True]
    out: dict = {"items": True if not items else items[0] if len(items) == 1 else {"allOf": items}}
    if prefix:
        out["prefixItems"] = prefix
    return out


def _positional(p: dict, ptr: str) -> dict:
    """A part's `items` list (drafts 4-2019) as prefixItems, `additionalItems` as its items."""
    if "prefixItems" in p:
        return p  # (both forms in one part: refused by the caller)
    if isinstance(p.get("items"), list):
        rest = {k: v for k, v in p.items() if k not in ("items", "additionalItems")}
        return {**rest, "prefixItems": p["items"], "items": p.get("additionalItems", True)}
    return {k: v for k, v in p.items() if k != "additionalItems"}


def _lcm(a: Any, b: Any, ptr: str) -> Any:
    if all(isinstance(x, int) or (isinstance(x, float) and x.is_integer()) for x in (a, b)):
        a, b = int(a), int(b)
        return a * b // math.gcd(a, b)
    from ministruct.grammar.schema.numbers import decimal_lcm

    if all(isinstance(x, (int, float)) and not isinstance(x, bool) and x > 0 for x in (a, b)):
        got = decimal_lcm(a, b)  # multiples of both decimal steps: of their least common multiple
        if got is not None:
            return got
    raise MergeError("allOf: cannot merge these multipleOf values exactly", f"{ptr}/multipleOf", "multipleOf")


def _combine(k: str, a: Any, b: Any, ptr: str) -> Any:
    if k == "type":
        ta = {a} if isinstance(a, str) else set(a)
        tb = {b} if isinstance(b, str) else set(b)
        both = ta & tb
        if "number" in ta and "integer" in tb or "integer" in ta and "number" in tb:
            both.add("integer")
        return sorted(both)
    if k == "required":
        return list(dict.fromkeys(list(a) + list(b)))
    if k in _MAXES:
        return max(a, b)
    if k in _MINS:
        return min(a, b)
    if k == "enum":
        return [x for x in a if any(_json_eq(x, y) for y in b)]
    if k == "const":
        return a if _json_eq(a, b) else _Empty.marker()
    if k == "multipleOf":
        return _lcm(a, b, ptr)
    if k == "uniqueItems":
        return bool(a) or bool(b)
    if k in (CONDITIONS, NOT_MULTIPLE_OF, PATTERNS, CONTAINS, WITNESSES):
        return a + b
    if k == "contains" and not _json_eq(a, b):  # two things to contain are not one thing containing both
        raise MergeError("allOf: cannot merge two different 'contains' exactly", f"{ptr}/contains", "contains")
    if k == "not":  # not a and not b: not (a or b)
        return {"anyOf": [a, b]}
    if k in _SCHEMA_VALUED:
        return {"allOf": [a, b]}
    if k in ("oneOf", "anyOf") and _json_eq(a, b):
        return a  # (one list met twice, as through a recursion: a and a is a)
    if k in ("oneOf", "anyOf"):
        # exactly one of a and exactly one of b: exactly one pair (any pair, for anyOf)
        return _pairs(k, a, b, ptr)
    if k == "prefixItems" and len(a) == len(b):
        return [{"allOf": [x, y]} for x, y in zip(a, b)]
    if _json_eq(a, b) or k not in _ASSERTING:
        return a  # unknown keywords assert nothing (JSON Schema ignores them): either value will do
    raise MergeError(f"allOf: cannot merge two different '{k}' values exactly", f"{ptr}/{k}", k)


def _pairs(k: str, a: list, b: list, ptr: str) -> list:
    """The conjunctions of a branch of `a` and a branch of `b` whose kinds of value meet
    (the others hold of no value), at most MAX_PRODUCT. For anyOf, a branch both lists
    hold is one option, and the pairs with it say no more."""
    if len(a) * len(b) > 4 * MAX_PRODUCT:
        raise MergeError(f"allOf: several {k} lists with {len(a) * len(b):,} combinations", f"{ptr}/{k}", k)
    out = []
    if k == "anyOf":
        out = [x for x in a if any(_json_eq(x, y) for y in b)]
        a = [x for x in a if not any(_json_eq(x, y) for y in out)]
        b = [y for y in b if not any(_json_eq(x, y) for x in out)]
    kinds_b = [kinds_of(y) for y in b]
    for x in a:
        kinds_x = kinds_of(x)
        out += [{"allOf": [x, y]} for y, kinds_y in zip(b, kinds_b) if kinds_x & kinds_y]
    if len(out) > MAX_PRODUCT:
        why = f"{len(out):,} combinations that may hold, more than {MAX_PRODUCT} (the limit)"
        raise MergeError(f"allOf: several {k} lists with {why}", f"{ptr}/{k}", k)
    return out or [False]


def _merge_shapes(shape: list) -> dict:
    """Exact merge of properties / additionalProperties / patternProperties of several parts."""
    with_pp = [p for p, _ in shape if p.get("patternProperties")]
    strict_ap = [p for p, _ in shape if p.get("additionalProperties", True) is not True]
    if any(KEY_PARTS in p for p, _ in shape) or (len(with_pp) > 1 and strict_ap and not _patterns_cover(shape)):
        return _merge_key_parts(shape)
    props: dict = {}
    for n in _listed_names(shape):
        subs = []
        for p, q in shape:
            pp = p.get("properties") or {}
            if n in pp:
                subs.append(pp[n])
                continue
            matched = [s for pat, s in (p.get("patternProperties") or {}).items() if _search(pat, n, q)]
            subs += matched if matched else [p.get("additionalProperties", True)]
        subs = [s for s in subs if s is not True]
        props[n] = True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs}
    out: dict = {"properties": props}
    dropped: set[str] = set()
    aps = [p.get("additionalProperties", True) for p, _ in shape]
    aps = [a for a in aps if a is not True]
    out["additionalProperties"] = True if not aps else aps[0] if len(aps) == 1 else {"allOf": aps}
    pps: dict = {}
    for p, q in shape:
        for pat, s in (p.get("patternProperties") or {}).items():
            # a part without the pattern applies its additionalProperties (_patterns_cover:
            # a part with its own patterns and a strict additionalProperties has them all),
            # but not to the names it lists, which the merged pattern would reach too
            without = [o for o, _ in shape if o is not p and pat not in (o.get("patternProperties") or {})]
            if any(o.get("additionalProperties", True) is False for o in without):
                # no unlisted name may match it: it goes (unlisted names fall to the merged
                # additionalProperties, false), and its schema joins the listed names it matches
                for n in p.get("properties") or {}:  # (the others have it from `matched` above)
                    if s is not True and _search(pat, n, q):
                        props[n] = s if props[n] is True else {"allOf": [props[n], s]}
                dropped.add(pat)
                continue
            for o in without:
                lists = [n for n in (o.get("properties") or {}) if _search(pat, n, q)]
                if lists and o.get("additionalProperties", True) is not True:
                    return _merge_key_parts(shape)  # (the pattern reaches o's listed names, o's extras not)
            pps.setdefault(pat, []).extend([s] + [o.get("additionalProperties", True) for o in without])
    for pat in dropped:
        pps.pop(pat, None)
    if pps:
        out["patternProperties"] = {}
        for pat, subs in pps.items():
            subs = [json.loads(t) for t in dict.fromkeys(json.dumps(x, sort_keys=True) for x in subs if x is not True)]
            out["patternProperties"][pat] = True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs}
    return out


def _listed_names(shape: list) -> list[str]:
    """The names the parts' `properties` list, in order, once each."""
    names: list[str] = []
    for p, _ in shape:
        names += [n for n in (p.get("properties") or {}) if n not in names]
    return names


def key_parts_of(part: dict) -> list[tuple[dict, Any]]:
    """A schema object's (patternProperties, additionalProperties) pairs: KEY_PARTS', or its own."""
    if KEY_PARTS in part:
        return [(pp, ap) for pp, ap in part[KEY_PARTS]]
    pp = part.get("patternProperties") or {}
    ap = part.get("additionalProperties", True)
    return [(pp, ap)] if pp or ap is not True else []


def unlisted_schemas(pairs: list[tuple[dict, Any]], name: str, ptr: str = "") -> list:
    """What a name no `properties` lists meets under these pairs (True left out)."""
    subs = []
    for pp, ap in pairs:
        hits = [s for pat, s in pp.items() if _search(pat, name, ptr)]
        subs += hits if hits else [ap]
    return [s for s in subs if s is not True]


def _merge_key_parts(shape: list) -> dict:
    """Exact merge of parts whose patterns and additionalProperties do not fold into one
    pair: listed names get every part's schema for them, the other names KEY_PARTS."""
    props: dict = {}
    for n in _listed_names(shape):
        subs = []
        for p, q in shape:
            own = p.get("properties") or {}
            if n in own:  # (its patterns hold for it too, its additionalProperties not)
                subs += [own[n]] + [s for pp, _ in key_parts_of(p) for pat, s in pp.items() if _search(pat, n, q)]
            else:
                subs += unlisted_schemas(key_parts_of(p), n, q)
        subs = [s for s in subs if s is not True]
        props[n] = True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs}
    pairs = []
    for p, q in shape:
        for pp, ap in key_parts_of(p):
            if not isinstance(pp, dict):
                raise MergeError("patternProperties must be an object", f"{q}/patternProperties", "patternProperties")
            for pat in pp:
                _search(pat, "", q)  # (an invalid pattern is said here)
            pairs.append([pp, ap])
    return {"properties": props, KEY_PARTS: pairs}


def _patterns_cover(shape: list) -> bool:
    """Does every part with a strict additionalProperties list every part's patterns (so
    that it applies exactly where no pattern of any part matches)?"""
    every = {pat for p, _ in shape for pat in (p.get("patternProperties") or {})}
    return all(
        every <= set(p.get("patternProperties") or {})
        for p, _ in shape
        if p.get("additionalProperties", True) is not True
    )


def _search(pattern: str, name: str, ptr: str) -> bool:
    try:
        return re.search(pattern, name) is not None
    except re.error:
        raise MergeError(f"invalid pattern {pattern!r}", f"{ptr}/patternProperties", "patternProperties") from None


class _Empty:
    @staticmethod
    def marker() -> list:
        raise MergeError("allOf: two different const values: no instance is valid", "", "const")
