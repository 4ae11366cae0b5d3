"""Arrays whose items are counted: `contains` with `minContains`/`maxContains` (the count
of items valid against the contained schema is in range), and `uniqueItems` over a few
listed values (one state per set of values used), both exact.

Each item is either one that matches (its schema and `contains`) or one that does not (its
schema and `not: contains`, made disjoint that way, so every array is counted once); a
small machine over (items so far, matches so far), both saturating where the bounds stop
telling counts apart, writes one rule per state. Past MAX_CONTAINS_STATES states the
schema is refused by pointer.
"""

from __future__ import annotations

import itertools
from typing import Any, Optional

from ministruct.errors import SchemaError
from ministruct.grammar.ir import NOTHING, Expr, Literal, Mark, RuleRef, alt, seq
from ministruct.grammar.schema.context import SchemaContext
from ministruct.grammar.schema.keywords import ANNOTATIONS

MAX_CONTAINS_STATES = 2000


def _dead(e: Optional[Expr]) -> bool:
    return e is None or e == NOTHING


def _count(c: SchemaContext, node: dict, k: str, ptr: str, default: Optional[int]) -> Optional[int]:
    x = node.get(k, default)
    if x is None:
        return None
    if isinstance(x, float) and x.is_integer():
        x = int(x)
    if isinstance(x, bool) or not isinstance(x, int) or x < 0:
        raise c.error(f"{k} must be a non-negative integer", f"{ptr}/{k}", k)
    return x


MAX_ORDERED_VALUES = 1000  # item values uniqueItems tracks (unique.py), in listed order past its sets
MAX_SORTED_VALUES = 64  # listed item values sorted by the contains they match (more: where needed)
MAX_COUNTED = 3  # `contains` of one array (merged allOf parts): 2**3 kinds of item


def contains_array(
    c: SchemaContext,
    node: dict,
    ptr: str,
    depth: int,
    prefix: list[Any],
    tail: Any,
    min_i: int,
    max_i: Optional[int],
) -> Optional[Expr]:
    """The array text: items `prefix[i]` then `tail` (False: none), minItems..maxItems items,
    of which minContains..maxContains match `contains` (and as many match each `contains`
    of other merged parts, CONTAINS); None when not enforced (past the limit, lenient=True)."""
    from ministruct.grammar.schema.merge import CONTAINS

    counted = [node, *node.get(CONTAINS, [])]
    conds = []  # (schema, lo, top: counts at or past it are alike, hi)
    for part in counted:
        lo = _count(c, part, "minContains", ptr, 1) or 0
        hi = _count(c, part, "maxContains", ptr, None)
        if hi is not None and hi < lo:
            return NOTHING
        conds.append((part["contains"], lo, hi + 1 if hi is not None else lo, hi))
    where = f"{ptr}/contains"
    kinds: dict[int, list[tuple[Expr, tuple[int, ...]]]] = {}
    sorted_items = _sorted_values(c, conds, ptr, depth, prefix, tail, len(counted) > MAX_COUNTED)
    if sorted_items is not None:  # finitely many item values, each known to match or not
        conds, counts, kinds[0] = sorted_items
        if counts is None:
            return NOTHING
        min_i = max(min_i, counts[0])
        max_i = counts[1] if max_i is None else max_i if counts[1] is None else min(max_i, counts[1])
        if max_i is not None and max_i < min_i:
            return NOTHING
    elif len(counted) > MAX_COUNTED:
        c.unsupported("contains", ptr, f"of more than {MAX_COUNTED} allOf parts together is not enforced")
        return None
    top_n = max_i if max_i is not None else max(min_i, len(prefix), 1)  # (0 items: no separator yet)
    states = top_n + 1
    for _, _, top, _ in conds:
        states *= top + 1
    if states > MAX_CONTAINS_STATES:
        c.unsupported(
            "contains", ptr, f"with these item counts needs more than {MAX_CONTAINS_STATES} states (the limit)"
        )
        return None

    def items(n: int) -> list[tuple[Expr, tuple[int, ...]]]:
        """(an item at position n, which conditions it matches (1) or not (0)) per kind."""
        i = min(n, len(prefix))
        if i not in kinds:
            s = prefix[i] if i < len(prefix) else tail
            kinds[i] = []
            if s is not False:
                for bits in itertools.product((1, 0), repeat=len(conds)):
                    parts = [s] if s is not True else []
                    parts += [x if b else {"not": x} for (x, _, _, _), b in zip(conds, bits)]
                    e = c.value(parts[0] if len(parts) == 1 else {"allOf": parts}, where, depth + 1)
                    if not _dead(e):
                        kinds[i].append((c.marked(f"item{ptr}/{i}", e, Mark("*", "value")), bits))
        return kinds[i]

    def after(n: int) -> int:
        return n + 1 if max_i is not None or n + 1 <= top_n else top_n

    ends: dict[tuple, bool] = {}
    moves: dict[tuple, list[tuple[Expr, Expr, tuple]]] = {}
    start = (0, *(0 for _ in conds))
    todo = [start]
    while todo:
        st = todo.pop()
        if st in moves:
            continue
        n, ks = st[0], st[1:]
        ends[st] = n >= min_i and all(k >= lo and (hi is None or k <= hi) for k, (_, lo, _, hi) in zip(ks, conds))
        moves[st] = []
        if max_i is None or n < max_i:
            sep = c.open_(depth) if n == 0 else c.comma(depth)
            for item, bits in items(n):
                ks2 = tuple(min(k + b, top) for k, b, (_, _, top, _) in zip(ks, bits, conds))
                if all(hi is None or k <= hi for k, (_, _, _, hi) in zip(ks2, conds)):
                    nxt = (after(n), *ks2)
                    moves[st].append((sep, item, nxt))
                    todo.append(nxt)
    live = {st for st, e in ends.items() if e}  # states from which the array can be closed
    changed = True
    while changed:
        changed = False
        for st, ms in moves.items():
            if st not in live and any(m[2] in live for m in ms):
                live.add(st)
                changed = True
    if start not in live:
        return NOTHING
    names = {st: RuleRef(c.fresh(f"arr{ptr}-contains")) for st in sorted(live)}
    for st in sorted(live):
        opts: list[Expr] = [c.empty_inside() if st[0] == 0 else c.close(depth)] if ends[st] else []
        opts += [seq(sep, item, names[nxt]) for sep, item, nxt in moves[st] if nxt in live]
        c.define(names[st].name, alt(*opts))
    return c.marked(f"arr{ptr}", seq(Literal("["), names[start], Literal("]")), Mark(None, "structure"))


def _sorted_values(
    c: SchemaContext, conds: list, ptr: str, depth: int, prefix: list, tail: Any, needed: bool
) -> Optional[tuple[list, Optional[tuple[int, Optional[int]]], list[tuple[Expr, tuple[int, ...]]]]]:
    """Where every item is one of a few listed values (no prefixItems), each value is
    checked against each `contains` by the validator: a `contains` every value matches
    counts the items (its bounds bound the array's length), one no value matches asks
    for none, and the values that match the same others are one kind of item (an `enum`).
    (the conditions left, (min, max) items (None: none can hold), the item kinds) or None.
    `needed`: more parts than MAX_COUNTED (else many values, a range of integers, stay one kind)."""
    if prefix or not isinstance(tail, dict):
        return None
    values = item_values(c, tail, f"{ptr}/items")
    if values is None or (len(values) > MAX_SORTED_VALUES and not needed):
        return None  # (a range of integers stays a range where the parts are few)
    checks = [c.validator.evolve(schema=x).is_valid for x, _, _, _ in conds]
    bits_of = [tuple(int(ok(v)) for ok in checks) for v in values]
    keep, lo_n, hi_n = [], 0, None
    for j, (_, lo, _, hi) in enumerate(conds):
        col = {b[j] for b in bits_of}
        if col == {1}:  # every item matches: the count is the number of items
            lo_n = max(lo_n, lo)
            hi_n = hi if hi_n is None else hi_n if hi is None else min(hi_n, hi)
        elif 1 not in col:  # no item matches
            if lo > 0:
                return [], None, []
        else:
            keep.append(j)
    groups: dict[tuple[int, ...], list] = {}
    for v, b in zip(values, bits_of):
        groups.setdefault(tuple(b[j] for j in keep), []).append(v)
    kinds = []
    for bits, vs in groups.items():
        e = c.value({"enum": vs}, f"{ptr}/items", depth + 1)
        if not _dead(e):
            kinds.append((c.marked(f"item{ptr}/0", e, Mark("*", "value")), bits))
    return [conds[j] for j in keep], (lo_n, hi_n), kinds


MAX_UNIQUE_VALUES = 12  # uniqueItems over listed values: one state per set of values used (2**n)


def finite_items(c: SchemaContext, items: Any, node: dict) -> Optional[list]:
    """The values an item (`items`, merged into `node`) may take when there are few
    (`enum`/`const`, booleans, null), or None."""
    from ministruct.grammar.schema.disjoint import canonical

    if "const" in node or isinstance(node.get("enum"), list):
        values = [node["const"]] if "const" in node else node["enum"]
    elif node.get("type") in ("boolean", ["boolean"]) and set(node) <= {"type", *ANNOTATIONS}:
        values = [True, False]
    else:
        return None
    valid = c.validator.evolve(schema=items).is_valid
    out: dict[str, Any] = {}
    for v in values:
        if valid(v):
            out.setdefault(canonical(v), v)
    return list(out.values())


def item_values(c: SchemaContext, items: Any, ptr: str) -> Optional[list]:
    """The values an array item may take, when they are few enough to track (listed values,
    booleans, integers in a small range), or None."""
    from ministruct.grammar.schema.merge import MergeError, merge_all

    if not isinstance(items, dict):
        return None
    try:
        node = merge_all(items, ptr, c.resolver)
    except (MergeError, SchemaError):
        return None
    values = finite_items(c, items, node)
    if values is not None:
        return values if len(values) <= MAX_ORDERED_VALUES else None
    return _integer_range(c, items, node)


def _integer_range(c: SchemaContext, items: Any, node: dict) -> Optional[list]:
    from ministruct.grammar.schema import numbers as num

    if node.get("type") not in ("integer", ["integer"]):
        return None
    b = {k: node[k] for k in ("minimum", "maximum", "exclusiveMinimum", "exclusiveMaximum") if k in node}
    if any(isinstance(x, bool) or not isinstance(x, (int, float)) for x in b.values()):
        return None
    lo, hi = num.int_bounds(b.get("minimum"), b.get("maximum"), b.get("exclusiveMinimum"), b.get("exclusiveMaximum"))
    if lo is None or hi is None or hi - lo + 1 > MAX_ORDERED_VALUES:
        return None
    valid = c.validator.evolve(schema=items).is_valid
    return [v for v in range(lo, hi + 1) if valid(v)]


def unique_array(c: SchemaContext, values: list, ptr: str, depth: int, min_i: int, max_i: Optional[int]) -> Expr:
    """Arrays of distinct items from `values`, min_i..max_i of them, in any order, exactly."""
    n = len(values)
    hi = n if max_i is None else min(max_i, n)
    if min_i > hi:
        return NOTHING
    texts = [c.value({"const": v}, f"{ptr}/items", depth + 1) for v in values]
    names: dict[int, RuleRef] = {}

    def state(mask: int) -> RuleRef:
        if mask not in names:
            names[mask] = RuleRef(c.fresh(f"arr{ptr}-unique"))
            todo.append(mask)
        return names[mask]

    todo: list[int] = []
    state(0)
    while todo:
        mask = todo.pop()
        used = bin(mask).count("1")
        opts: list[Expr] = []
        if used >= min_i:
            opts.append(c.empty_inside() if used == 0 else c.close(depth))
        if used < hi and used + (n - used) >= min_i:
            sep = c.open_(depth) if used == 0 else c.comma(depth)
            for i in range(n):
                if not mask & (1 << i):
                    opts.append(seq(sep, texts[i], state(mask | (1 << i))))
        c.define(names[mask].name, alt(*opts) if opts else NOTHING)
    return c.marked(f"arr{ptr}", seq(Literal("["), names[0], Literal("]")), Mark(None, "structure"))
