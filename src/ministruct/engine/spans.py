"""Spans: intervals (of bytes or byte classes) that carry targets.

The transition table cuts overlapping spans into disjoint ones (`disjoint`); a slice
chain asks which one target a range of bytes, or a set of classes, leads to
(`range_target`, `one_target`).
"""

from __future__ import annotations

from bisect import bisect_left
from typing import Any, Iterable, TypeVar

T = TypeVar("T")
NO_EDGE = -1  # (one_target, range_target: no byte or class of the range has an edge)


def disjoint(spans: list[tuple[int, int, T]]) -> list[tuple[int, int, list[T]]]:
    """Overlapping (lo, hi, item) spans as disjoint (lo, hi, the items covering it), in order;
    stretches no span covers are left out."""
    groups: dict[tuple[int, int], list[T]] = {}  # (the stacks of a configuration often share bounds)
    for lo, hi, item in spans:
        if lo < hi:
            items = groups.get((lo, hi))
            if items is None:
                groups[(lo, hi)] = [item]
            else:
                items.append(item)
    keys = sorted(groups)
    end = -1
    for lo, hi in keys:
        if lo < end:
            break
        end = hi
    else:  # (most configurations) already disjoint
        return [(lo, hi, groups[lo, hi]) for lo, hi in keys]
    bounds = sorted({b for key in keys for b in key})
    at = {b: i for i, b in enumerate(bounds)}
    covering: list[list[T]] = [[] for _ in bounds]
    for lo, hi in keys:
        items = groups[lo, hi]
        for i in range(at[lo], at[hi]):
            covering[i].extend(items)
    return [(bounds[i], bounds[i + 1], items) for i, items in enumerate(covering) if items]


def one_target(one: list[int], spans: Iterable[tuple[int, int, Any]]) -> Any:
    """The target every class of `one` (sorted) has in `spans`, disjoint class segments
    (lo, hi, target): NO_EDGE when no segment holds any of them, None when they part or
    some of them are in no segment (lead nowhere)."""
    target, taken = NO_EDGE, 0
    for lo, hi, t in spans:
        n = bisect_left(one, hi) - bisect_left(one, lo)
        if n:
            if taken and t != target:
                return None
            target, taken = t, taken + n
    return None if 0 < taken < len(one) else target


def range_target(edges: list[tuple[int, int, int]], lo: int, hi: int) -> int | None:
    """The one state every byte of lo..hi leads to by `edges`; NO_EDGE when no byte of it
    has an edge; None when the bytes lead to different states, several, or only some anywhere."""
    target = NO_EDGE
    spans = []
    for a, b, t in edges:
        if b < lo or a > hi:
            continue
        if target != NO_EDGE and t != target:
            return None
        target = t
        spans.append((max(a, lo), min(b, hi)))
    if target == NO_EDGE:
        return target
    spans.sort()
    reach = lo - 1
    for a, b in spans:
        if a > reach + 1:
            return None
        reach = max(reach, b)
    return target if reach >= hi else None
