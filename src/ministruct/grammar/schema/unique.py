"""`uniqueItems` where the items' language is finite: listed values (`enum`/`const`,
booleans) or a small range of integers, exactly.

Where it is not (free strings, numbers, objects), no grammar of the engine's kind can say
it: "three or more distinct items" is not context-free (intersected with the arrays
`["a..ab", "a..ab", "a..ab"]` it is {a^i b a^j b a^k b : i, j, k distinct}, the textbook
language the pumping lemma rules out), and "two distinct items" is context-free but not
regular (x != y: a position where they differ, or different lengths), with one copy of
the grammar per character a differing position may hold (the whole of Unicode for a JSON
string). So such a schema is refused by pointer, and with lenient=True (`gen --lenient`)
the rest is enforced and each output is checked against the full schema afterwards (the
record's `schema_check`).

Two machines, whichever is small enough: any order, one state per set of values used so
far (the sets of at most maxItems of the values: MAX_UNIQUE_STATES at most); or, past it,
the values in the order they are listed (integers ascending), one state per (next value
that may come, items so far): every set of distinct values is still written, in one
order, as `properties` are. Past MAX_ORDERED_VALUES values, or items whose language is
not finite (free strings: no grammar can tell two of them apart), the schema is refused
by pointer (with lenient=True the keyword is not enforced, and `gen --lenient` checks each
output against the whole schema afterwards).
"""

from __future__ import annotations

from math import comb
from typing import Optional

from ministruct.grammar.ir import NOTHING, Expr, Literal, Mark, RuleRef, alt, seq
from ministruct.grammar.schema.contains import MAX_ORDERED_VALUES, unique_array
from ministruct.grammar.schema.context import SchemaContext

MAX_UNIQUE_STATES = 4096  # sets of values used (any order)
MAX_ORDERED_STATES = 20_000  # (next value, items so far)


def unique_refusal(node: dict) -> str:
    """Why `uniqueItems` of an array node is not enforced (for the refusal)."""
    if "prefixItems" in node or isinstance(node.get("items"), list):
        return "is not enforced together with prefixItems (tuple items)"
    if "contains" in node:
        return "is not enforced together with contains"
    why = (
        "two distinct items need one copy of the grammar per character where they may differ"
        if node.get("maxItems") == 2
        else "three or more distinct items are not a context-free language"
    )
    return (
        "is not enforced over items that are not a few listed values, booleans or integers in a range of at"
        f" most {MAX_ORDERED_VALUES:,} (free strings, numbers, objects: {why})"
    )


def any_order_states(n: int, max_i: Optional[int]) -> int:
    """The sets of at most max_i of n values."""
    top = n if max_i is None else min(n, max_i)
    return sum(comb(n, i) for i in range(top + 1))


def unique_items_array(
    c: SchemaContext, values: list, ptr: str, depth: int, min_i: int, max_i: Optional[int]
) -> Optional[Expr]:
    """Arrays of distinct items from `values`, min_i..max_i of them; None (refused, or not
    enforced with lenient=True) past the limits."""
    n = len(values)
    if any_order_states(n, max_i) <= MAX_UNIQUE_STATES:
        return unique_array(c, values, ptr, depth, min_i, max_i)
    top = n if max_i is None else min(n, max_i)
    if min_i > top:
        return NOTHING
    counts = top + 1 if max_i is not None else max(min_i, 1) + 1
    if (n + 1) * counts > MAX_ORDERED_STATES:
        c.unsupported(
            "uniqueItems",
            ptr,
            f"over {n} values needs {(n + 1) * counts:,} states, more than {MAX_ORDERED_STATES:,} (the limit)",
        )
        return None
    c.restricted("uniqueItems", ptr, f"over {n} values is generated in the order listed (integers ascending)")
    texts = [c.value({"const": v}, f"{ptr}/items", depth + 1) for v in values]
    cap = top if max_i is not None else max(min_i, 1)  # counts past min_i (and 0) are alike without a maximum

    def after(i: int, k: int) -> Expr:
        """k items written, the next value (if any) from index i on."""
        opts: list[Expr] = []
        if k >= min_i:
            opts.append(c.empty_inside() if k == 0 else c.close(depth))
        if i < n and (max_i is None or k < max_i) and k + (n - i) >= min_i:
            opts.append(take[(i, k)])
        return alt(*opts) if opts else NOTHING

    # take[(i, k)]: one of the values i.. as the next item after k, then what may follow it
    take = {(i, k): RuleRef(c.fresh(f"arr{ptr}-unique")) for i in range(n) for k in range(cap + 1)}
    for i in range(n - 1, -1, -1):  # (each rule refers to later values only)
        for k in range(cap + 1):
            sep = c.open_(depth) if k == 0 else c.comma(depth)
            opts: list[Expr] = [seq(sep, texts[i], after(i + 1, min(k + 1, cap)))]
            if i + 1 < n:
                opts.append(take[(i + 1, k)])
            c.define(take[(i, k)].name, alt(*opts))
    return c.marked(f"arr{ptr}", seq(Literal("["), after(0, 0), Literal("]")), Mark(None, "structure"))
