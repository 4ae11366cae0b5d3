"""Length bounds as a restriction: a sub-language of a string language whose every string
has `lo` to `hi` characters, without an automaton.

`pattern` or `format` with `minLength`/`maxLength` is exact through a DFA x length product
(schema/patterns.py) while that product is small. Past it (an e-mail address or a URI
with a maxLength of 254, a pattern with maxLength 500), `within_length` gives a subset of
the language instead, made by sharing out the length budget over the expression's parts:
a sequence gives each part its minimum and a share of what is left, a repetition of
fixed-length items is counted down (or up, for a minimum), an alternative keeps the
options that fit. Every string of the result has an allowed length and is in the
language, so every output stays valid; what is lost are some strings of allowed length
whose parts are unevenly long (an e-mail address whose local part takes 200 of its 254
characters). The result is checked with `length_bounds` before it is used.
"""

from __future__ import annotations

from typing import Optional

from ministruct.grammar.ir import EMPTY, Alt, CharClass, Expr, Literal, Repeat, Seq, alt, seq
from ministruct.grammar.schema.lengths import length_bounds

_INF = float("inf")
FEW_ITEMS = 4  # a repetition of items of several lengths: counts up to this one are options of their own


def within_length(e: Expr, lo: int, hi: Optional[int]) -> Optional[Expr]:
    """A sub-language of L(e) (a rule-free, decoded expression) whose strings all have
    `lo` to `hi` characters (hi None: no maximum); None when none was found."""
    try:
        got = _lift(e, lo)
        if got is not None and hi is not None:
            got = _fit(got, hi)
        if got is None:
            return None
        a, b = length_bounds(got)
    except ValueError:  # a rule reference: not an expression of characters
        return None
    if a < lo or (hi is not None and (b is None or b > hi)):
        return None
    return got


def _lift(e: Expr, lo: int) -> Optional[Expr]:
    """A sub-language of L(e) with no string shorter than `lo`."""
    a, b = length_bounds(e)
    if a >= lo:
        return e
    if b is not None and b < lo:
        return None
    if isinstance(e, Alt):
        opts = [x for x in (_lift(o, lo) for o in e.options) if x is not None]
        return alt(*opts) if opts else None
    if isinstance(e, Seq):
        items = list(e.items)
        need = lo - a
        bounds = [length_bounds(x) for x in items]
        # the parts with the most room first (unbounded ones before all)
        order = sorted(
            range(len(items)), key=lambda i: -(_INF if bounds[i][1] is None else bounds[i][1] - bounds[i][0])
        )
        for i in order:
            if need <= 0:
                break
            ia, ib = bounds[i]
            room = _INF if ib is None else ib - ia
            if room <= 0:
                continue
            grown = _lift(items[i], ia + int(min(need, room)))
            if grown is None:
                continue
            items[i] = grown
            need -= length_bounds(grown)[0] - ia
        return seq(*items) if need <= 0 else None
    if isinstance(e, Repeat):
        item = e.item
        ia, _ = length_bounds(item)
        if ia == 0:
            item = _lift(item, 1)
            if item is None:
                return None
            ia = length_bounds(item)[0]
        count = -(-lo // ia)
        if e.max is None or count <= e.max:
            return Repeat(item, max(e.min, count), e.max)
        # too few repetitions allowed: each item must be longer
        item = _lift(item, -(-lo // e.max))
        return None if item is None else Repeat(item, e.max, e.max)
    return None


def _fit(e: Expr, hi: int) -> Optional[Expr]:
    """A sub-language of L(e) with no string longer than `hi`, keeping e's minimum length."""
    a, b = length_bounds(e)
    if b is not None and b <= hi:
        return e
    if a > hi:
        return None
    if isinstance(e, Alt):
        opts = [x for x in (_fit(o, hi) for o in e.options) if x is not None]
        return alt(*opts) if opts else None
    if isinstance(e, Seq):
        items = list(e.items)
        bounds = [length_bounds(x) for x in items]
        spare = hi - a  # characters beyond every part's minimum
        loose = sorted(
            (i for i, (x, y) in enumerate(bounds) if y is None or y > x),
            key=lambda i: _INF if bounds[i][1] is None else bounds[i][1] - bounds[i][0],
        )
        for k, i in enumerate(loose):
            ia, ib = bounds[i]
            share = spare // (len(loose) - k)
            if ib is not None and ib - ia <= share:
                spare -= ib - ia
                continue
            got = _fit(items[i], ia + share)
            if got is None:
                return None
            items[i] = got
            spare -= length_bounds(got)[1] - ia  # type: ignore[operator]
        return seq(*items)
    if isinstance(e, Repeat):
        ia, ib = length_bounds(e.item)
        if ib == 0:
            return e if ia == 0 else None
        if ia == ib:
            most = hi // ia
            top = most if e.max is None else min(e.max, most)
            return Repeat(e.item, e.min, top) if top >= e.min else None
        # items of several lengths: k items of at most hi // k characters each, one option
        # per count up to FEW_ITEMS (one long item, or a few shorter), then many short ones
        opts: list[Expr] = [EMPTY] if e.min == 0 else []
        top = FEW_ITEMS if e.max is None else min(e.max, FEW_ITEMS)
        for k in range(max(e.min, 1), top + 1):
            item = _fit(e.item, hi // k)
            if item is not None:
                opts.append(Repeat(item, k, k))
        if e.max is None or e.max > FEW_ITEMS:
            item = _fit(e.item, max(ia, hi // (2 * FEW_ITEMS)))
            if item is not None:
                most = hi // (length_bounds(item)[1] or 1)
                most = most if e.max is None else min(most, e.max)
                least = max(e.min, FEW_ITEMS + 1)
                if most >= least:
                    opts.append(Repeat(item, least, most))
        return alt(*opts) if opts else None
    if isinstance(e, (Literal, CharClass)) or e == EMPTY:
        return e if a <= hi else None
    return None


def below(e: Expr, top: int) -> Expr:
    """L(e) without the strings that hold a code point above `top` (for a product with an
    ASCII-only format: the same product, with small character classes)."""
    if isinstance(e, CharClass):
        return CharClass(tuple((a, min(b, top)) for a, b in e.code_point_ranges() if a <= top))
    if isinstance(e, Literal):
        return e if all(ord(ch) <= top for ch in e.text) else CharClass(())
    if isinstance(e, Seq):
        return seq(*(below(x, top) for x in e.items))
    if isinstance(e, Alt):
        return alt(*(below(x, top) for x in e.options))
    if isinstance(e, Repeat):
        return Repeat(below(e.item, top), e.min, e.max)
    return e
