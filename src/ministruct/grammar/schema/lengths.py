"""Lengths of decoded string languages (rule-free expressions): their bounds, the exact
part of a language within length bounds where an expression can say it, and a search for
a fixed-length pattern within length bounds (schema strings: strings.py; formats)."""

from __future__ import annotations

from functools import lru_cache
from typing import Optional

from ministruct.grammar.ir import EMPTY, Alt, CharClass, Expr, Literal, Repeat, Seq, alt, seq


@lru_cache(maxsize=1 << 14)
def length_bounds(e: Expr) -> tuple[int, Optional[int]]:
    """(min, max) decoded length of a rule-free expression; max None when unbounded.
    (Cached: a format's expression is asked again for every string of that format.)"""
    if isinstance(e, Literal):
        return len(e.text), len(e.text)
    if isinstance(e, CharClass):
        return 1, 1
    if isinstance(e, Seq):
        lo, hi = 0, 0
        for x in e.items:
            a, b = length_bounds(x)
            lo += a
            hi = None if hi is None or b is None else hi + b
        return lo, hi
    if isinstance(e, Alt):
        bs = [length_bounds(x) for x in e.options]
        his = [b for _, b in bs]
        return min(a for a, _ in bs), None if None in his else max(his)  # type: ignore[type-var]
    if isinstance(e, Repeat):
        a, b = length_bounds(e.item)
        return a * e.min, None if e.max is None or b is None else b * e.max
    raise ValueError("length of a rule reference")


def restrict_length(e: Expr, lo: int, hi: Optional[int]) -> Optional[Expr]:
    """The exact subset of L(e) with lengths in [lo, hi], when expressible; None otherwise.

    Raises LookupError when the result is empty.
    """
    a, b = length_bounds(e)
    if a >= lo and (hi is None or (b is not None and b <= hi)):
        return e
    if hi is not None and (a > hi or lo > hi):
        raise LookupError("empty")
    if b is not None and b < lo:
        raise LookupError("empty")
    if isinstance(e, Alt):
        opts = []
        for o in e.options:
            try:
                r = restrict_length(o, lo, hi)
            except LookupError:
                continue
            if r is None:
                return None
            opts.append(r)
        if not opts:
            raise LookupError("empty")
        return alt(*opts)
    if isinstance(e, Repeat):
        ia, ib = length_bounds(e.item)
        if ia != ib or ia == 0:
            return None
        k = ia
        m = max(e.min, -(-lo // k))
        n = (hi // k) if hi is not None else None
        if e.max is not None:
            n = e.max if n is None else min(n, e.max)
        if n is not None and m > n:
            raise LookupError("empty")
        return Repeat(e.item, m, n)
    if isinstance(e, Seq):
        var = [i for i, x in enumerate(e.items) if length_bounds(x)[0] != length_bounds(x)[1]]
        if len(var) != 1:
            return None
        fixed = sum(length_bounds(x)[0] for i, x in enumerate(e.items) if i != var[0])
        r = restrict_length(e.items[var[0]], max(0, lo - fixed), None if hi is None else hi - fixed)
        if r is None:
            return None
        items = list(e.items)
        items[var[0]] = r
        return seq(*items)
    return None


def search_core(p: Expr, left: bool, right: bool) -> Expr:
    """For an unanchored side, a pattern whose edge item is x{m,n} matches iff x{m} does."""
    if isinstance(p, Repeat) and (left or right):
        return Repeat(p.item, p.min, p.min)
    if isinstance(p, Seq) and p.items:
        items = list(p.items)
        if left and isinstance(items[0], Repeat):
            items[0] = Repeat(items[0].item, items[0].min, items[0].min)
        if right and isinstance(items[-1], Repeat):
            items[-1] = Repeat(items[-1].item, items[-1].min, items[-1].min)
        return seq(*items)
    return p


ANY_CP = CharClass((), negated=True)
MAX_SEARCH_LENGTH = 64


def search_with_length(p: Expr, left: bool, right: bool, lo: int, hi: Optional[int]) -> Optional[Expr]:
    """Decoded strings containing a match of fixed-length p (per anchors) with length in [lo, hi]."""
    f, g = length_bounds(p)
    if f != g:
        return None
    if left and right:
        return None
    if hi is not None and hi - f > MAX_SEARCH_LENGTH:
        return None
    if not left and not right:
        top = (hi - f) if hi is not None else max(lo - f, 0)
        opts = []
        for i in range(0, top + 1):
            tail_lo = max(0, lo - f - i)
            tail_hi = None if hi is None else hi - f - i
            if tail_hi is not None and tail_hi < tail_lo:
                continue
            opts.append(seq(Repeat(ANY_CP, i, i) if i else EMPTY, p, Repeat(ANY_CP, tail_lo, tail_hi)))
        if hi is None:
            opts.append(seq(Repeat(ANY_CP, top + 1, None), p, Repeat(ANY_CP, 0, None)))
        return alt(*opts) if opts else None
    # one side anchored: the free side takes the remaining length
    free = Repeat(ANY_CP, max(0, lo - f), None if hi is None else hi - f)
    if hi is not None and hi < f:
        return None
    return seq(p, free) if left else seq(free, p)
