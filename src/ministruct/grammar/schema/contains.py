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
    of which minContains..maxContains match `contains`; None when `contains` is not enforced
    (past the limit, with lenient=True)."""
    contains = node["contains"]
    lo = _count(c, node, "minContains", ptr, 1) or 0
    hi = _count(c, node, "maxContains", ptr, None)
    if hi is not None and hi < lo:
        return NOTHING
    top_c = hi + 1 if hi is not None else lo  # counts at or past top_c are alike (dead, or enough)
    top_n = max_i if max_i is not None else max(min_i, len(prefix), 1)  # (0 items: no separator yet)
    if (top_n + 1) * (top_c + 1) > MAX_CONTAINS_STATES:
        c.unsupported(
            "contains", ptr, f"with these item counts needs more than {MAX_CONTAINS_STATES} states (the limit)"
        )
        return None
    where = f"{ptr}/contains"
    yes_no: dict[int, tuple[Expr, Expr]] = {}

    def items(n: int) -> tuple[Expr, Expr]:
        """(a matching item, an item that does not match) at position n."""
        i = min(n, len(prefix))
        if i not in yes_no:
            s = prefix[i] if i < len(prefix) else tail
            if s is False:
                yes_no[i] = (NOTHING, NOTHING)
            else:
                yes = c.value({"allOf": [s, contains]} if s is not True else contains, where, depth + 1)
                no = c.value({"allOf": [s, {"not": contains}]}, where, depth + 1)
                yes_no[i] = tuple(c.marked(f"item{ptr}/{i}", e, Mark("*", "value")) for e in (yes, no))  # type: ignore[assignment]
        return yes_no[i]

    def after(n: int) -> int:
        return n + 1 if max_i is not None or n + 1 <= top_n else top_n

    ends: dict[tuple[int, int], bool] = {}
    moves: dict[tuple[int, int], list[tuple[Expr, Expr, tuple[int, int]]]] = {}
    todo = [(0, 0)]
    while todo:
        st = todo.pop()
        if st in moves:
            continue
        n, k = st
        ends[st] = n >= min_i and k >= lo and (hi is None or k <= hi)
        moves[st] = []
        if max_i is None or n < max_i:
            sep = c.open_(depth) if n == 0 else c.comma(depth)
            yes, no = items(n)
            for item, k2 in ((yes, min(k + 1, top_c)), (no, k)):
                if not _dead(item) and (hi is None or k2 <= hi):
                    moves[st].append((sep, item, (after(n), k2)))
                    todo.append((after(n), k2))
    live = {st for st, e in ends.items() if e}  # states from which the array can be closed
    changed = True
    while changed:
        changed = False
        for st, ms in moves.items():
            if st not in live and any(m[2] in live for m in ms):
                live.add(st)
                changed = True
    if (0, 0) not in live:
        return NOTHING
    names = {st: RuleRef(c.fresh(f"arr{ptr}-contains")) for st in sorted(live)}
    for st in sorted(live):
        opts: list[Expr] = [c.empty_inside() if st[0] == 0 else c.close(depth)] if ends[st] else []
        opts += [seq(sep, item, names[nxt]) for sep, item, nxt in moves[st] if nxt in live]
        c.define(names[st].name, alt(*opts))
    return c.marked(f"arr{ptr}", seq(Literal("["), names[(0, 0)], Literal("]")), Mark(None, "structure"))


MAX_UNIQUE_VALUES = 12  # uniqueItems over listed values: one state per set of values used (2**n)


def finite_items(c: SchemaContext, items: Any, ptr: str) -> Optional[list]:
    """The values an item may take when there are few (`enum`/`const`, booleans, null), or None."""
    from ministruct.grammar.schema.disjoint import canonical
    from ministruct.grammar.schema.merge import MergeError, merge_all

    if not isinstance(items, dict):
        return None
    try:
        node = merge_all(items, ptr, c.resolver)
    except (MergeError, SchemaError):
        return None
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
