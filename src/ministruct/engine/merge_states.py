"""Equivalent automaton states merged into one (for automata that read greedy lexemes).

A rule built from a repeat has states that behave alike: in `and_test ("or" and_test)*`
the return point after the first `and_test` and the one after each later one both go on
to `"or"` or to the rule's end. A parser context is the stack of such return points, so
two contexts that differ only there (the first operand of an `or` against a later one)
are different configurations, each filling its own table rows and walking the whole
vocabulary again for a mask that is the same. Here such states are found (same rule,
same finality, edges with the same labels to states found alike, recursively: iterated
hash-consing, which merges only states that behave alike) and every edge into a state
is pointed at its class's representative, so the contexts are one configuration.

States of a bounded repeat's copies and loop entries keep their identity: the mask keys
of long repeats (Automaton.canonical_states) and the warming of slices read them by
position. The language, and every per-state reading (rule, lexeme ends, frames kept),
is unchanged.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

MAX_ROUNDS = 64  # rounds of merging at most (each merge is sound on its own: stopping early only merges less)


def merge_equivalent_states(a: Any) -> int:
    """Point every edge of the automaton `a` (an Automaton being built) at the
    representative of its target's class of alike states; returns how many states were
    merged into others."""
    n = len(a.eps)
    fixed = set(a.loop_entries) | set(a.start.values())
    for blocks, end, _, _, _ in a.repeat_blocks:
        fixed.update(range(blocks[0], end))
    rep = list(range(n))
    final = a.final
    preds: list[list[int]] = [[] for _ in range(n)]
    for q in range(n):
        for t in {t for _, _, t in a.byte_edges[q]} | set(a.eps[q]) | {r for _, r in a.calls[q]}:
            preds[t].append(q)
        for e in a.token_edges[q]:
            preds[e.target].append(q)
    # signature -> a state that had it (merging is sound with an older entry too: its
    # targets were alike then and still are)
    seen: dict[tuple, int] = {}
    merged = 0
    todo = [q for q in range(n) if q not in fixed]
    for _ in range(MAX_ROUNDS):
        changed: list[int] = []
        for q in todo:
            if rep[q] != q:
                continue
            sig = (
                a.rule_of[q],
                q in final,
                tuple(sorted({(lo, hi, rep[t]) for lo, hi, t in a.byte_edges[q]})),
                tuple(sorted({rep[t] for t in a.eps[q]})),
                tuple(sorted({(name, rep[r]) for name, r in a.calls[q]})),
                tuple(sorted({(e.token_id, e.name, e.negated, rep[e.target]) for e in a.token_edges[q]}, key=repr)),
            )
            other = seen.get(sig)
            while other is not None and rep[other] != other:
                other = rep[other]
            if other is None or other == q:
                seen[sig] = q
            else:
                rep[q] = other
                changed.append(q)
        if not changed:
            break
        merged += len(changed)
        for q in range(n):  # (chains: a representative merged later points further)
            r = rep[q]
            while rep[r] != r:
                r = rep[r]
            rep[q] = r
        # only the states with an edge into a merged one have a new signature
        todo = sorted({p for q in changed for p in preds[q] if rep[p] == p and p not in fixed})
    if not merged:
        return 0
    for q in range(n):
        if a.byte_edges[q]:
            a.byte_edges[q] = list(dict.fromkeys((lo, hi, rep[t]) for lo, hi, t in a.byte_edges[q]))
        if a.eps[q]:
            a.eps[q] = list(dict.fromkeys(rep[t] for t in a.eps[q]))
        if a.calls[q]:
            a.calls[q] = list(dict.fromkeys((name, rep[r]) for name, r in a.calls[q]))
        if a.token_edges[q]:
            a.token_edges[q] = list(dict.fromkeys(replace(e, target=rep[e.target]) for e in a.token_edges[q]))
    return merged
