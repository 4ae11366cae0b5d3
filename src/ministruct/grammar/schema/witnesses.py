"""Witnessed objects: WITNESSES (logic.py) asks, for each (pattern, schema), for some
property whose name the pattern finds (re.search) with a value valid under the schema;
that is what a failed `patternProperties` or `propertyNames: {not: {pattern}}` leaves.

The object's member machine (objects.py) carries the set of witnesses seen. A listed
property whose name a pattern finds may claim that witness (its value then also in the
witness's schema); so may an additional member, whose key is sorted by one DFA with the
witness patterns as components (pattern_keys.py). After the listed names, the remaining
witnesses must each be claimed by some additional member, the member count staying in
minProperties..maxProperties. Claiming is a choice, so the union over choices is
exactly the objects where each witness is met by some member (among the members the
object may carry: listed names, and additional keys the node allows)."""

from __future__ import annotations

import itertools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Optional

from ministruct.grammar.ir import NOTHING, Expr, Literal, Repeat, RuleRef, alt, seq
from ministruct.grammar.schema.context import SchemaContext
from ministruct.grammar.schema.merge import KEY_PARTS, WITNESSES
from ministruct.grammar.schema.pattern_keys import MAX_PATTERNS, name_pattern, pattern_extras

MAX_WITNESSES = 4  # claims are subsets of the witnesses: 2**4 member variants at most
MAX_TAIL_STATES = 4000  # (members so far, witnesses still to claim) after the listed names


def _dead(e: Optional[Expr]) -> bool:
    return e is None or e == NOTHING


@dataclass
class Witnesses:
    """The witnesses of one object node, and the members that may claim them."""

    found: list[tuple[str, Any]]
    member: Callable[[int, frozenset], Expr]  # listed entry i claiming a set of witnesses
    matching: list[frozenset] = field(default_factory=list)  # per entry: witnesses its name meets
    extras: dict[frozenset, Expr] = field(default_factory=dict)  # additional members claiming a set
    ptr: str = "/"

    @property
    def every(self) -> frozenset:
        return frozenset(range(len(self.found)))


def witnesses_of(
    c: SchemaContext,
    node: dict,
    ptr: str,
    depth: int,
    names: list[str],
    entry_names: list[str],
    member: Callable[[int, frozenset], Expr],
) -> Optional[Witnesses]:
    """The node's WITNESSES, with the additional members that can claim them; None
    when it has none. More than MAX_WITNESSES is a refusal naming `not`."""
    raw = node.get(WITNESSES)
    if not raw:
        return None
    found = [(p, s) for p, s in ((x[0], x[1]) for x in raw)]
    found = [x for i, x in enumerate(found) if x not in found[:i]]  # (the same `not` met twice)
    if len(found) > MAX_WITNESSES:
        c.unsupported("not", ptr, f"needs more than {MAX_WITNESSES} kinds of property at once (the limit)")
        return None
    for p, _ in found:
        try:
            re.compile(p)
        except (re.error, TypeError):
            raise c.error(f"invalid pattern {p!r}", f"{ptr}/not", "not") from None
    w = Witnesses(found, member, ptr=ptr)
    w.matching = [frozenset(j for j, (p, _) in enumerate(found) if re.search(p, n)) for n in entry_names]
    pn = node.get("propertyNames", True)
    pp = node.get("patternProperties") or {}
    pairs = [(kp, kap) for kp, kap in node[KEY_PARTS]] if KEY_PARTS in node else None  # (merged parts' own)
    pn_pat = name_pattern(pn)
    if pn is False or (pn is not True and pn_pat is None) or not isinstance(pp, dict) or len(pp) > MAX_PATTERNS:
        c.restricted("not", ptr, "is met only by listed properties here")
        return w
    # (a name no keyword evaluates: unevaluatedProperties' value holds for it)
    ap = node.get("additionalProperties", node.get("unevaluatedProperties", True))
    for size in range(1, len(found) + 1):
        for claim in itertools.combinations(range(len(found)), size):
            got = pattern_extras(c, ptr, depth, names, ap, pp, pn_pat, tuple(found[j] for j in claim), pairs)
            if not _dead(got):
                w.extras[frozenset(claim)] = got
    return w


def witness_tail(
    c: SchemaContext,
    w: Witnesses,
    kvx: Optional[Expr],
    cnt: int,
    need: frozenset,
    min_p: int,
    max_p: Optional[int],
    depth: int,
    tail: Callable[[int], Expr],
) -> Expr:
    """The additional members after the listed ones, `cnt` members so far, when the
    witnesses `need` are still to be claimed; `tail(cnt)` is the rest once none are."""
    cap = max(min_p, 1) if max_p is None else None  # past it, counting no longer matters
    top = max(cnt, cap if cap is not None else max_p)
    built: dict[tuple[int, frozenset], Expr] = {}
    subsets = [frozenset(x) for k in range(len(need) + 1) for x in itertools.combinations(sorted(need), k)]
    if (top - cnt + 1) * len(subsets) > MAX_TAIL_STATES:
        c.unsupported(
            "not", w.ptr, f"with these property counts needs more than {MAX_TAIL_STATES:,} states (the limit)"
        )
        return NOTHING
    for left in subsets:  # smaller sets first, counts from the top down: what each state refers to is built
        for k in range(top, cnt - 1, -1):
            built[(k, left)] = _state(c, w, kvx, k, left, cap, max_p, depth, tail, built)
    return built[(cnt, need)]


def _state(
    c: SchemaContext,
    w: Witnesses,
    kvx: Optional[Expr],
    cnt: int,
    need: frozenset,
    cap: Optional[int],
    max_p: Optional[int],
    depth: int,
    tail: Callable[[int], Expr],
    built: dict,
) -> Expr:
    """The rest after `cnt` members with the witnesses `need` still to be claimed."""
    if not need:
        return tail(cnt)
    if max_p is not None and cnt >= max_p:
        return NOTHING
    sep = c.open_(depth) if cnt == 0 else c.comma(depth)
    nxt = cnt + 1 if cap is None else min(cnt + 1, cap)
    opts = []
    for claim, x in w.extras.items():
        if claim & need and not _dead(after := built[(nxt, need - claim)]):
            opts.append(seq(sep, x, after))
    if cap is not None and cnt >= cap:  # plain members, any number, before a claiming one
        body = alt(*opts) if opts else NOTHING
        if kvx is not None and not _dead(body):
            body = seq(Repeat(seq(c.comma(depth), kvx), 0, None), body)
    else:
        if kvx is not None and not _dead(after := built[(nxt, need)]):
            opts.append(seq(sep, kvx, after))
        body = alt(*opts) if opts else NOTHING
    if not _dead(body) and not isinstance(body, (Literal, RuleRef)):
        body = c.rule("witness", body)
    return body
