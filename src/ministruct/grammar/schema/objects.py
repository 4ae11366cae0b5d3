"""Objects and arrays for the JSON Schema front end.

Objects: listed properties in `properties` order (required ones must appear), then
required names not listed, then additional properties; a small state machine over
(position, members so far) makes minProperties/maxProperties exact.
"""

from __future__ import annotations

import itertools
import re
from typing import TYPE_CHECKING, Any, Optional

from ministruct.grammar.ir import NOTHING, Expr, Literal, Mark, Repeat, RuleRef, alt, seq
from ministruct.grammar.limits import pointer_token
from ministruct.grammar.schema.context import SchemaContext
from ministruct.grammar.schema.formats import (
    string_literal,
)
from ministruct.grammar.schema.keys import not_in_names
from ministruct.grammar.schema.merge import (
    CONTAINS,
    KEY_PARTS,
    WITNESSES,
    MergeError,
    Resolver,
    merge_all,
    unlisted_schemas,
)
from ministruct.grammar.schema.pattern_keys import extra_member, name_pattern, names_of_branches, pattern_extras

if TYPE_CHECKING:
    from ministruct.grammar.schema.witnesses import Witnesses

MAX_OBJECT_STATES = 4000


def _dead(e: Optional[Expr]) -> bool:
    return e is None or e == NOTHING


def _int_kw(c: SchemaContext, node: dict, k: str, ptr: str, default: Optional[int]) -> Optional[int]:
    if k not in node:
        return default
    x = node[k]
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise c.error(f"{k} must be a non-negative integer", f"{ptr}/{k}", k)
    return x


# ------------------------------------------------------------ objects


def object_expr(c: SchemaContext, node: dict, ptr: str, depth: int) -> Expr:
    props = node.get("properties", {})
    if not isinstance(props, dict):
        raise c.error("properties must be an object", f"{ptr}/properties", "properties")
    required = node.get("required", [])
    if not isinstance(required, list) or not all(isinstance(r, str) for r in required):
        raise c.error("required must be an array of strings", f"{ptr}/required", "required")
    ap = node.get("additionalProperties", True)
    pp = node.get("patternProperties", {}) or {}
    if c.explicit and "additionalProperties" not in node and (props or required or pp):
        # the generation language: no unnamed properties unless the schema states them
        # (a schema naming nothing, `{"type": "object"}`, keeps JSON Schema's meaning)
        ap_extra: Any = False
    else:
        ap_extra = ap
    if not isinstance(pp, dict):
        raise c.error("patternProperties must be an object", f"{ptr}/patternProperties", "patternProperties")
    pn = node.get("propertyNames", True)
    if isinstance(pn, dict) and "$ref" in pn:  # (a named string schema: read through its $ref)
        try:
            pn = merge_all(pn, f"{ptr}/propertyNames", c.resolver)
        except MergeError:
            pass

    def folded(b: Any) -> Any:
        try:
            return merge_all(b, f"{ptr}/propertyNames", c.resolver) if isinstance(b, dict) else b
        except MergeError:
            return b

    pn = names_of_branches(pn, folded)
    min_p = _int_kw(c, node, "minProperties", ptr, 0) or 0
    max_p = _int_kw(c, node, "maxProperties", ptr, None)
    pn_validator = c.validator.evolve(schema=pn) if pn is not True else None

    names = listed_names(node)
    entries: list[tuple[Expr, bool]] = []
    never: set[str] = set()  # listed names whose value can be nothing: they never appear
    for n in names:
        req = n in required
        subs = [props[n]] if n in props else []
        for pat, s in pp.items():
            try:
                hit = re.search(pat, n) is not None
            except re.error:
                raise c.error(f"invalid pattern {pat!r}", f"{ptr}/patternProperties", "patternProperties") from None
            if hit:
                subs.append(s)
        if n not in props and len(subs) == 0:
            subs = unlisted_schemas(node[KEY_PARTS], n, ptr) if KEY_PARTS in node else [ap]
        if pn_validator is not None and not pn_validator.is_valid(n):
            subs = [False]
        subs = [s for s in subs if s is not True]
        schema: Any = True if not subs else subs[0] if len(subs) == 1 else {"allOf": subs}
        where = (
            f"{ptr}/properties/{pointer_token(n)}"
            if n in props
            else f"{ptr}/required"
            if n in required
            else f"{ptr}/dependentRequired"
        )
        val = c.value(schema, where, depth + 1)
        if _dead(val):
            if req:
                return NOTHING
            never.add(n)
            continue
        entries.append((_member(c, ptr, n, val), req, n, schema, where))

    kvx = _extras(c, node, ptr, depth, names, ap_extra, pp, pn)
    if kvx is None and ap_extra is not ap and max(min_p, 0) > len(entries):
        kvx = _extras(c, node, ptr, depth, names, ap, pp, pn)  # minProperties needs more than the names
    deps = required_dependencies(node) or {}  # (their names are listed: no additional property has them)
    listed = {e[2] for e in entries}
    changed = True
    while changed:  # names that never appear: their dependencies hold, or forbid their trigger
        changed = False
        for trigger, needed in list(deps.items()):
            if trigger not in listed:
                del deps[trigger]
            elif any(x not in listed for x in needed):
                if any(e[2] == trigger and e[1] for e in entries):
                    return NOTHING
                del deps[trigger]
                entries = [e for e in entries if e[2] != trigger]
                listed.discard(trigger)
                changed = True
    w = None
    if node.get(WITNESSES):
        from ministruct.grammar.schema.witnesses import witnesses_of

        def claiming(i: int, claim: frozenset) -> Expr:
            n, schema, where = entries[i][2], entries[i][3], entries[i][4]
            if not claim:
                return entries[i][0]
            wanted = [w.found[j][1] for j in sorted(claim)]
            return _member(c, ptr, n, c.value({"allOf": [schema, *wanted]}, where, depth + 1))

        w = witnesses_of(c, node, ptr, depth, names, [e[2] for e in entries], claiming)
    return _members(c, entries, kvx, min_p, max_p, ptr, depth, deps, w)


def _member(c: SchemaContext, ptr: str, name: str, val: Expr) -> Expr:
    """The member `"name": val` of a listed name, or nothing when `val` is."""
    if _dead(val):
        return NOTHING
    seg = pointer_token(name)
    key = c.marked(f"key{ptr}/{seg}", string_literal(name), Mark(None, "key"))
    val = c.marked(f"val{ptr}/{seg}", val, Mark(None, "value"))
    return c.marked(f"member{ptr}/{seg}", seq(key, c.colon(), val), Mark(seg, "structure"))


def listed_names(node: dict) -> list[str]:
    """The names an object node lists, in the order they are generated: `properties`,
    then `required` names not among them, then the names `dependentRequired` (or the
    array form of `dependencies`) speaks of: a name a schema asks for when another is
    there is a name it states, under the explicit policy too."""
    props = node.get("properties") if isinstance(node.get("properties"), dict) else {}
    required = node.get("required") if isinstance(node.get("required"), list) else []
    names = list(props) + [r for r in dict.fromkeys(required) if isinstance(r, str) and r not in props]
    if required_dependencies(node) is None:
        return names  # (a dependency that is a schema: rewritten to branches, which list its names)
    for k in ("dependentRequired", "dependencies"):
        for trigger, needed in (node.get(k) or {}).items():
            names += [x for x in dict.fromkeys([trigger, *needed]) if x not in names]
    return names


def required_dependencies(node: dict) -> "Optional[dict[str, list[str]]]":
    """`dependentRequired` and the array form of `dependencies`, merged; None when some
    dependency is a schema (dependentSchemas' form), which is not enforced."""
    out: dict[str, list[str]] = {}
    for k in ("dependentRequired", "dependencies"):
        v = node.get(k, {})
        if not isinstance(v, dict):
            return None
        for trigger, needed in v.items():
            if not isinstance(needed, list) or not all(isinstance(x, str) for x in needed):
                return None
            out.setdefault(trigger, [])
            out[trigger] += [x for x in needed if x != trigger and x not in out[trigger]]
    return {t: n for t, n in out.items() if n}


def _extras(
    c: SchemaContext, node: dict, ptr: str, depth: int, names: list[str], ap: Any, pp: dict, pn: Any
) -> Optional[Expr]:
    """One additional `"key": value` member (a rule), or None when none are allowed."""
    if pn is False:
        return None
    if KEY_PARTS in node:  # (merged parts: their patterns and extras, kept apart)
        if pn is not True and name_pattern(pn) is None:
            c.unsupported("propertyNames", ptr, "together with patternProperties is not enforced")
            return None
        pairs = [(kp, kap) for kp, kap in node[KEY_PARTS]]
        return pattern_extras(c, ptr, depth, names, True, {}, name_pattern(pn), pairs=pairs)
    if pp and not (ap is True and all(s is True for s in pp.values())):
        schemas = list(pp.values())
        simple = (
            ap is False
            and all(s == schemas[0] for s in schemas[1:])
            and not any(re.search(p, n) for p in pp for n in names)
        )
        pn_pat = name_pattern(pn)
        if (not simple and pn is True) or (pn is not True and pn_pat is not None):
            return pattern_extras(c, ptr, depth, names, ap, pp, pn_pat)
        if ap is not False:
            c.unsupported("patternProperties", ptr, "with additionalProperties other than false is not enforced")
            return None
        if any(s != schemas[0] for s in schemas[1:]):
            c.unsupported("patternProperties", ptr, "with several patterns of different schemas is not enforced")
            return None
        for n in names:
            if any(re.search(p, n) for p in pp):
                c.unsupported(
                    "patternProperties", ptr, f"matching the listed property {n!r} is not enforced for other keys"
                )
                return None
        if pn is not True:
            c.unsupported("propertyNames", ptr, "together with patternProperties is not enforced")
            return None
        key = alt(*[c.value({"type": "string", "pattern": p}, f"{ptr}/patternProperties", 0) for p in pp])
        val = c.value(schemas[0], f"{ptr}/patternProperties/{pointer_token(next(iter(pp)))}", depth + 1)
    elif ap is False:
        return None
    else:
        if pn is not True:
            pv = c.validator.evolve(schema=pn)
            if any(pv.is_valid(n) for n in names) and name_pattern(pn) is not None:
                return pattern_extras(c, ptr, depth, names, ap, {}, name_pattern(pn))  # (listed names excluded)
            if any(pv.is_valid(n) for n in names):
                c.unsupported("propertyNames", ptr, "together with listed properties it allows is not enforced")
                return None
            key = c.value({"allOf": [pn, {"type": "string"}]}, f"{ptr}/propertyNames", 0)
        else:
            key = not_in_names(c, names)
        val = c.value(ap, f"{ptr}/additionalProperties", depth + 1)
    if _dead(key) or _dead(val):
        return None
    key = c.marked(f"xkey{ptr}", key, Mark(None, "key"))
    val = c.marked(f"xval{ptr}", val, Mark(None, "value"))
    return extra_member(c, ptr, seq(key, c.colon(), val))


def _members(
    c: SchemaContext,
    entries: list,
    kvx: Optional[Expr],
    min_p: int,
    max_p: Optional[int],
    ptr: str,
    depth: int,
    deps: "dict[str, list[str]] | None" = None,
    w: "Witnesses | None" = None,
) -> Expr:
    """The members of an object, in order: a state machine over (entry, members so far,
    the present names that later entries' dependencies still look at, the witnesses
    claimed: witnesses.py)."""
    n = len(entries)
    sat = max(min_p, (max_p + 1) if max_p is not None else 0, 1)
    # (entry i, members so far): at most i listed members before entry i (the rest is one count)
    if (min_p or max_p is not None) and (n + 1) * (min(n, sat) + 1) > MAX_OBJECT_STATES:
        c.unsupported(
            "maxProperties" if max_p is not None else "minProperties", ptr, "is too large to count exactly here"
        )
        min_p, max_p, sat = 0, None, 1
    deps = deps or {}
    pos = {e[2]: i for i, e in enumerate(entries)}
    needs_before = [[d for d in deps.get(e[2], ()) if pos[d] < i] for i, e in enumerate(entries)]
    needed_by_before = [[t for t, ds in deps.items() if e[2] in ds and pos[t] < i] for i, e in enumerate(entries)]
    # keep[i]: names before entry i whose presence an entry from i on still checks
    keep = [
        frozenset(
            x
            for x, j in pos.items()
            if j < i
            and any(k >= i for k in [pos[d] for d in deps.get(x, ())] + [pos[t] for t, ds in deps.items() if x in ds])
        )
        for i in range(n + 1)
    ]

    def moves(i: int, cnt: int, present: frozenset, hit: frozenset) -> list[tuple[Optional[frozenset], tuple]]:
        name, req = entries[i][2], entries[i][1]
        out: list[tuple[Optional[frozenset], tuple]] = []
        if (max_p is None or cnt + 1 <= max_p) and all(d in present for d in needs_before[i]):
            new = sorted(w.matching[i] - hit) if w is not None else []
            for size in range(len(new) + 1):  # the witnesses it claims (none: its plain member)
                for claim in map(frozenset, itertools.combinations(new, size)):
                    out.append((claim, (i + 1, min(cnt + 1, sat), (present | {name}) & keep[i + 1], hit | claim)))
        if not req and not any(t in present for t in needed_by_before[i]):
            out.append((None, (i + 1, cnt, present & keep[i + 1], hit)))
        return out

    # reachable states and how often each is referenced
    start = (0, 0, frozenset(), frozenset())
    refs: dict[tuple, int] = {start: 1}
    todo = [start]
    while todo:
        st = todo.pop()
        if st[0] == n:
            continue
        for _, nxt in moves(*st):
            if nxt not in refs:
                refs[nxt] = 0
                todo.append(nxt)
                if (deps or w) and len(refs) > MAX_OBJECT_STATES:
                    kw = "dependentRequired" if deps else "not"
                    c.unsupported(kw, ptr, f"needs more than {MAX_OBJECT_STATES:,} states (the limit) to enforce")
                    return _members(c, entries, kvx, min_p, max_p, ptr, depth, None, None)
            refs[nxt] += 1
    variants: dict[tuple, int] = {}
    built: dict[tuple, Expr] = {}
    members: dict[tuple[int, frozenset], Expr] = {}

    def claimed(i: int, claim: frozenset) -> Expr:
        if not claim or w is None:
            return entries[i][0]
        if (i, claim) not in members:
            members[(i, claim)] = w.member(i, claim)
        return members[(i, claim)]

    for st in sorted(refs, key=lambda x: (-x[0], -x[1], sorted(x[2]), sorted(x[3]))):
        i, cnt, present, hit = st
        if i == n and w is not None and hit != w.every:
            from ministruct.grammar.schema.witnesses import witness_tail

            def tail(k: int) -> Expr:
                return _tail(c, kvx, k, min_p, max_p, depth)

            body = witness_tail(c, w, kvx, cnt, w.every - hit, min_p, max_p, depth, tail)
        elif i == n:
            body = _tail(c, kvx, cnt, min_p, max_p, depth)
        else:
            opts = []
            for claim, nxt in moves(*st):
                after = built[nxt]
                if claim is None:
                    opts.append(after)
                elif not _dead(after) and not _dead(member := claimed(i, claim)):
                    opts.append(seq(c.open_(depth) if cnt == 0 else c.comma(depth), member, after))
            live = [o for o in opts if not _dead(o)]
            body = alt(*live) if live else NOTHING
        if refs[st] > 1 and not _dead(body) and not isinstance(body, (Literal, RuleRef)):
            k = variants.setdefault((i, cnt), 0)
            variants[(i, cnt)] += 1
            body = c.rule(f"obj{ptr}-{i}-{cnt}" + (f"-d{k}" if k else ""), body)
        built[st] = body
    inner = built[start]
    if _dead(inner):
        return NOTHING
    return c.marked(f"obj{ptr}", seq(Literal("{"), inner, Literal("}")), Mark(None, "structure"))


def _tail(c: SchemaContext, kvx: Optional[Expr], cnt: int, min_p: int, max_p: Optional[int], depth: int) -> Expr:
    lo = max(0, min_p - cnt)
    hi = None if max_p is None else max_p - cnt
    if hi is not None and (hi < 0 or lo > hi):
        return NOTHING
    end = c.empty_inside() if cnt == 0 else c.close(depth)
    if kvx is None or hi == 0:
        return end if lo == 0 else NOTHING
    more = Repeat(
        seq(c.comma(depth), kvx),
        max(lo - 1, 0) if cnt == 0 else lo,
        None if hi is None else (hi - 1 if cnt == 0 else hi),
    )
    if cnt > 0:
        return seq(more, end)
    some = seq(c.open_(depth), kvx, more, c.close(depth))
    return alt(end, some) if lo == 0 else some


# ------------------------------------------------------------ arrays


def array_expr(c: SchemaContext, node: dict, ptr: str, depth: int) -> Expr:
    prefix = node.get("prefixItems", [])
    items = node.get("items", True)
    pkw = "prefixItems"
    more = "items"
    if isinstance(items, list):  # draft-07 tuple form
        prefix, items, pkw, more = items, node.get("additionalItems", True), "items", "additionalItems"
    if (
        c.explicit
        and prefix
        and more not in node
        and "contains" not in node  # (an item past the tuple may be the one it asks for)
        and not (isinstance(node.get("minItems"), int) and node["minItems"] > len(prefix))
    ):
        items = False  # the generation language: a tuple has no further items unless stated
    if not isinstance(prefix, list):
        raise c.error("prefixItems must be an array", f"{ptr}/prefixItems", "prefixItems")
    min_i = c.bounded_count("minItems", _int_kw(c, node, "minItems", ptr, 0) or 0, ptr) or 0
    max_i = _int_kw(c, node, "maxItems", ptr, None)
    max_i = None if max_i is None else c.bounded_count("maxItems", max_i, ptr)
    if node.get("uniqueItems") is True and not prefix and "contains" not in node:
        from ministruct.grammar.schema.contains import item_values
        from ministruct.grammar.schema.unique import unique_items_array

        values = item_values(c, items, f"{ptr}/items")
        if values is not None:
            got = unique_items_array(c, values, ptr, depth, min_i, max_i)
            if got is not None:
                return got
    if "contains" in node and (node.get("minContains", 1) != 0 or "maxContains" in node or CONTAINS in node):
        from ministruct.grammar.schema.contains import contains_array

        if max_i is not None and max_i < min_i:
            return NOTHING
        counted = contains_array(c, node, ptr, depth, prefix, items, min_i, max_i)
        if counted is not None:
            return counted
    elems: list[Expr] = []
    for i, s in enumerate(prefix):
        e = c.value(s, f"{ptr}/{pkw}/{i}", depth + 1)
        if _dead(e):
            max_i = i if max_i is None else min(max_i, i)
            break
        elems.append(c.marked(f"item{ptr}/{i}", e, Mark(str(i), "value")))
    k = len(elems)
    tail = (
        NOTHING
        if items is False
        else c.value(items, f"{ptr}/items" if pkw == "prefixItems" else f"{ptr}/additionalItems", depth + 1)
    )
    if len(elems) < len(prefix):
        tail = NOTHING
    tail = c.marked(f"items{ptr}", tail, Mark("*", "value"))
    if max_i is not None and max_i < min_i:
        return NOTHING
    # state(k): tail elements
    lo_t = max(0, min_i - k)
    hi_t = None if max_i is None else max_i - k
    end_k = c.empty_inside() if k == 0 else c.close(depth)
    if _dead(tail) or hi_t is not None and hi_t <= 0:
        state: Expr = end_k if lo_t == 0 and (hi_t is None or hi_t >= 0) else NOTHING
    elif k == 0:
        some = seq(
            c.open_(depth),
            tail,
            Repeat(seq(c.comma(depth), tail), max(lo_t - 1, 0), None if hi_t is None else hi_t - 1),
            c.close(depth),
        )
        state = alt(end_k, some) if lo_t == 0 else some
    else:
        state = seq(Repeat(seq(c.comma(depth), tail), lo_t, hi_t), end_k)
    for i in range(k - 1, -1, -1):
        opts: list[Expr] = []
        if i >= min_i:
            opts.append(c.empty_inside() if i == 0 else c.close(depth))
        if (max_i is None or i < max_i) and not _dead(state):
            opts.append(seq(c.open_(depth) if i == 0 else c.comma(depth), elems[i], state))
        state = alt(*opts) if opts else NOTHING
    if _dead(state):
        return NOTHING
    return c.marked(f"arr{ptr}", seq(Literal("["), state, Literal("]")), Mark(None, "structure"))


# ------------------------------------------------------------ canonical order


def reorder(value: Any, schema: Any, resolver: Resolver, ptr: str, _depth: int = 0) -> Any:
    """`value` with object keys in the order the grammar generates them."""
    if not isinstance(schema, dict) or _depth > 64 or not isinstance(value, (dict, list)):
        return value
    try:
        node = merge_all(schema, ptr, resolver)
        while set(node) - {"$defs", "definitions", "title", "description"} == {"$ref"}:
            node, ptr = resolver.resolve(node["$ref"], ptr)
            if not isinstance(node, dict):
                return value
            node = merge_all(node, ptr, resolver)
    except Exception:
        return value
    for kw in ("anyOf", "oneOf"):
        if isinstance(node.get(kw), list):
            from jsonschema import Draft202012Validator

            v = Draft202012Validator(resolver.root)
            rest = {k: x for k, x in node.items() if k != kw}
            for sub in node[kw]:
                cand = {"allOf": [rest, sub]}
                try:
                    ok = v.evolve(schema=cand).is_valid(value)
                except Exception:
                    ok = False
                if ok:
                    return reorder(value, cand, resolver, ptr, _depth + 1)
            return value
    if isinstance(value, list):
        prefix = node.get("prefixItems", [])
        items = node.get("items", True)
        if isinstance(items, list):
            prefix, items = items, node.get("additionalItems", True)
        return [
            reorder(x, prefix[i] if i < len(prefix) else items, resolver, ptr, _depth + 1) for i, x in enumerate(value)
        ]
    props = node.get("properties") or {}
    order = listed_names(node)
    out: dict = {}
    for k in order + [k for k in value if k not in order]:
        if k in value and k not in out:
            sub = props.get(k)
            if sub is None:
                matched = [s for p, s in (node.get("patternProperties") or {}).items() if _safe_search(p, k)]
                sub = (
                    (matched[0] if len(matched) == 1 else {"allOf": matched})
                    if matched
                    else node.get("additionalProperties", True)
                )
            out[k] = reorder(value[k], sub, resolver, ptr, _depth + 1)
    return out


def _safe_search(p: str, k: str) -> bool:
    try:
        return re.search(p, k) is not None
    except re.error:
        return False
