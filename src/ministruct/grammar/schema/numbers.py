"""Exact digit grammars for JSON numbers in a range (JSON Schema minimum/maximum/multipleOf).

Integers (JSON text without fraction or exponent) are compared exactly, like Python's
`json` + `jsonschema` do (Python ints, any size). Numbers with a fraction become Python
floats in the validator, so their range is taken in the float domain: a bound b becomes
the decimal `repr()` of the nearest float on the allowed side (`math.nextafter` for
exclusive bounds), and since decimal -> float rounding is monotonic, every accepted
decimal text also passes the validator. Exponent forms are not produced when a bound
applies (false rejects only).
"""

from __future__ import annotations

import math
from decimal import Decimal
from typing import Any, Optional, Protocol

from ministruct.grammar.ir import EMPTY, CharClass, Expr, Literal, Repeat, RuleRef, alt, seq

DIGIT = CharClass(((48, 57),))
NONZERO = CharClass(((49, 57),))
MAX_ENUMERATED_MULTIPLES = 512
MAX_MODULUS = 1000


class RuleSink(Protocol):
    """Where helper rules go: `fresh(hint)` reserves a unique name, `define` sets its body."""

    def fresh(self, hint: str) -> str: ...

    def define(self, name: str, body: Expr) -> None: ...


def digits(lo: int, hi: int) -> Expr:
    """One digit in lo..hi."""
    if lo == hi:
        return Literal(str(lo))
    return CharClass(((48 + lo, 48 + hi),))


def _any_digits(n: int) -> Expr:
    return EMPTY if n == 0 else Repeat(DIGIT, n, n)


def _ge_fixed(s: str) -> Expr:
    """Digit strings of len(s) that are >= s."""
    out: Expr = EMPTY
    for i in range(len(s) - 1, -1, -1):
        d, rest = int(s[i]), len(s) - i - 1
        if set(s[i:]) == {"0"}:
            out = _any_digits(len(s) - i)
        elif d == 9:
            out = seq(Literal("9"), out)
        else:
            out = alt(seq(digits(d + 1, 9), _any_digits(rest)), seq(Literal(s[i]), out))
    return out


def _le_fixed(s: str) -> Expr:
    """Digit strings of len(s) that are <= s."""
    out: Expr = EMPTY
    for i in range(len(s) - 1, -1, -1):
        d, rest = int(s[i]), len(s) - i - 1
        if set(s[i:]) == {"9"}:
            out = _any_digits(len(s) - i)
        elif d == 0:
            out = seq(Literal("0"), out)
        else:
            out = alt(seq(digits(0, d - 1), _any_digits(rest)), seq(Literal(s[i]), out))
    return out


def _same_length(a: str, b: str) -> Expr:
    """Digit strings of equal length between a and b (a <= b)."""
    k = 0
    while k < len(a) and a[k] == b[k]:
        k += 1
    if k == len(a):
        return Literal(a)
    prefix, la, hb, rest = a[:k], int(a[k]), int(b[k]), len(a) - k - 1
    opts = [seq(Literal(a[k]), _ge_fixed(a[k + 1 :]))]
    if hb - la > 1:
        opts.append(seq(digits(la + 1, hb - 1), _any_digits(rest)))
    opts.append(seq(Literal(b[k]), _le_fixed(b[k + 1 :])))
    return seq(Literal(prefix), alt(*opts))


def nonneg_range(a: int, b: Optional[int]) -> Optional[Expr]:
    """Canonical digit strings (no leading zeros) of integers in [a, b]; None if empty."""
    a = max(a, 0)
    if b is not None and b < a:
        return None
    opts: list[Expr] = []
    la = len(str(a))
    lb = len(str(b)) if b is not None else None
    length = la
    while lb is None or length <= lb:
        lo_l = 0 if length == 1 else 10 ** (length - 1)
        hi_l = 10**length - 1
        lo, hi = max(a, lo_l), hi_l if b is None else min(b, hi_l)
        if lo == lo_l and hi == hi_l:  # all numbers of this length and maybe longer
            if b is None:
                opts.append(_free_from(length))
                break
            end = length
            while end + 1 <= lb and (10 ** (end + 1) - 1) <= b:
                end += 1
            opts.append(_free_lengths(length, end))
            length = end + 1
            continue
        opts.append(_same_length(str(lo), str(hi)))
        length += 1
    return alt(*opts) if opts else None


def _free_lengths(m: int, n: int) -> Expr:
    """All canonical numbers with m..n digits."""
    if m == 1:
        head: list[Expr] = [DIGIT]
        if n > 1:
            head.append(_free_lengths(2, n))
        return alt(*head)
    return seq(NONZERO, Repeat(DIGIT, m - 1, n - 1))


def _free_from(m: int) -> Expr:
    if m == 1:
        return alt(Literal("0"), seq(NONZERO, Repeat(DIGIT, 0, None)))
    return seq(NONZERO, Repeat(DIGIT, m - 1, None))


def int_range(lo: Optional[int], hi: Optional[int]) -> Optional[Expr]:
    """JSON integer texts (`-?(0|[1-9][0-9]*)`, "-0" when 0 is allowed) with lo <= value <= hi."""
    opts: list[Expr] = []
    if hi is None or hi >= 0:
        pos = nonneg_range(max(lo, 0) if lo is not None else 0, hi)
        if pos is not None:
            opts.append(pos)
    if lo is None or lo <= 0:
        neg = nonneg_range(max(-hi, 0) if hi is not None else 0, -lo if lo is not None else None)
        if neg is not None:
            opts.append(seq(Literal("-"), neg))
    return alt(*opts) if opts else None


# ------------------------------------------------------------- bounds


def int_bounds(
    minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None
) -> tuple[Optional[int], Optional[int]]:
    """The integer interval [lo, hi] allowed by (possibly float) JSON Schema bounds."""
    lo: Optional[int] = None
    hi: Optional[int] = None
    if minimum is not None:
        lo = math.ceil(minimum)
    if exclusive_minimum is not None:
        v = math.floor(exclusive_minimum) + 1
        lo = v if lo is None else max(lo, v)
    if maximum is not None:
        hi = math.floor(maximum)
    if exclusive_maximum is not None:
        v = math.ceil(exclusive_maximum) - 1
        hi = v if hi is None else min(hi, v)
    return lo, hi


def split_range(lo: Optional[int], hi: Optional[int], points: list[int]) -> list[tuple[Optional[int], Optional[int]]]:
    """[lo, hi] (None: unbounded) without the sorted integer `points`, as intervals."""
    out: list[tuple[Optional[int], Optional[int]]] = []
    a = lo
    for p in points:
        if (lo is not None and p < lo) or (hi is not None and p > hi):
            continue
        if a is None or a <= p - 1:
            out.append((a, p - 1))
        a = p + 1
    if a is None or hi is None or a <= hi:
        out.append((a, hi))
    return out


def split_float_range(lo: float, hi: float, points: list[float]) -> list[tuple[float, float]]:
    """The float interval [lo, hi] without the `points`, as intervals."""
    out = []
    a = lo
    for p in sorted(set(points)):
        if p < lo or p > hi:
            continue
        if a <= math.nextafter(p, -math.inf):
            out.append((a, math.nextafter(p, -math.inf)))
        a = math.nextafter(p, math.inf)
    if a <= hi:
        out.append((a, hi))
    return out


def _float_ge(x) -> float:
    """Smallest float >= x (x int or float)."""
    f = float(x) if abs(x) < 1.7e308 else math.copysign(math.inf, x)
    if isinstance(x, int) and not math.isinf(f) and f < x:
        f = math.nextafter(f, math.inf)
    return f


def _float_le(x) -> float:
    f = float(x) if abs(x) < 1.7e308 else math.copysign(math.inf, x)
    if isinstance(x, int) and not math.isinf(f) and f > x:
        f = math.nextafter(f, -math.inf)
    return f


def float_bounds(minimum=None, maximum=None, exclusive_minimum=None, exclusive_maximum=None):
    """The float interval [lo, hi] (inclusive) of float instances the bounds allow."""
    lo, hi = -math.inf, math.inf
    if minimum is not None:
        lo = max(lo, _float_ge(minimum))
    if exclusive_minimum is not None:
        f = _float_ge(exclusive_minimum)
        if f == exclusive_minimum:
            f = math.nextafter(f, math.inf)
        lo = max(lo, f)
    if maximum is not None:
        hi = min(hi, _float_le(maximum))
    if exclusive_maximum is not None:
        f = _float_le(exclusive_maximum)
        if f == exclusive_maximum:
            f = math.nextafter(f, -math.inf)
        hi = min(hi, f)
    return lo, hi


# ------------------------------------------------------------- fractions


def _split(d: Decimal) -> tuple[int, str]:
    """Nonnegative decimal -> (integer part, fraction digits without trailing zeros)."""
    s = format(d, "f")
    ip, _, fp = s.partition(".")
    return int(ip), fp.rstrip("0")


def _zero_runs(s: str, i: int) -> int:
    j = i
    while j < len(s) and s[j] == "0":
        j += 1
    return j - i


def _frac_ge(g: str, start: int = 0) -> Expr:
    """Fraction digits F[start:] (may be empty once g is matched) with F >= g (zero padded)."""
    out: Expr = Repeat(DIGIT, 0, None)
    # build from the end; zero runs compressed
    pieces: list[tuple[int, int]] = []  # (position, run length) processed from the front
    j = start
    while j < len(g):
        z = _zero_runs(g, j)
        if z:
            pieces.append((j, z))
            j += z
        else:
            pieces.append((j, 0))
            j += 1
    for pos, z in reversed(pieces):
        if z:
            free = seq(Repeat(Literal("0"), 0, z - 1), NONZERO, Repeat(DIGIT, 0, None))
            out = alt(free, seq(Literal("0" * z), out))
        else:
            d = int(g[pos])
            if d == 9:
                out = seq(Literal("9"), out)
            else:
                out = alt(seq(digits(d + 1, 9), Repeat(DIGIT, 0, None)), seq(Literal(g[pos]), out))
    return out


def _frac_le(h: str, start: int = 0, allow_empty: bool = True) -> Expr:
    """Fraction digits F[start:] with F <= h (zero padded)."""
    out: Expr = Repeat(Literal("0"), 0, None)
    pieces: list[tuple[int, int]] = []
    j = start
    while j < len(h):
        z = _zero_runs(h, j)
        if z:
            pieces.append((j, z))
            j += z
        else:
            pieces.append((j, 0))
            j += 1
    for k, (pos, z) in enumerate(reversed(pieces)):
        first = k == len(pieces) - 1
        empty_ok = allow_empty or not first
        if z:
            stop = Repeat(Literal("0"), 0 if empty_ok else 1, z - 1) if (z - 1 >= (0 if empty_ok else 1)) else None
            cont = seq(Literal("0" * z), out)
            out = alt(stop, cont) if stop is not None else cont
        else:
            d = int(h[pos])
            opts: list[Expr] = [EMPTY] if empty_ok else []
            if d > 0:
                opts.append(seq(digits(0, d - 1), Repeat(DIGIT, 0, None)))
            opts.append(seq(Literal(h[pos]), out))
            out = alt(*opts)
    if not pieces and not allow_empty:
        return Repeat(Literal("0"), 1, None)
    return out


def _frac_between(g: str, h: str) -> Optional[Expr]:
    """Nonempty fraction digits F with g <= F <= h (zero padded)."""
    n = max(len(g), len(h))
    gp, hp = g.ljust(n, "0"), h.ljust(n, "0")
    if gp > hp:
        return None
    k = 0
    while k < n and gp[k] == hp[k]:
        k += 1
    if k == n:  # g == h
        return seq(Literal(g), Repeat(Literal("0"), 0 if g else 1, None))
    lg, hh = int(gp[k]), int(hp[k])
    opts: list[Expr] = []
    if k >= len(g) and k > 0:
        opts.append(EMPTY)  # F ends here: padded zeros, g fully matched
    opts.append(seq(Literal(gp[k]), _frac_ge(g, k + 1)))
    if hh - lg > 1:
        opts.append(seq(digits(lg + 1, hh - 1), Repeat(DIGIT, 0, None)))
    opts.append(seq(Literal(hp[k]), _frac_le(h, k + 1)))
    rest = alt(*opts)
    c = min(k, len(g))  # forced digits of g; after them F may stop inside the zero run
    z = k - c
    if z == 0:
        return seq(Literal(gp[:c]), rest)
    min_stop = 0 if c > 0 else 1
    body = seq(Literal("0" * z), rest)
    if z - 1 >= min_stop:
        body = alt(Repeat(Literal("0"), min_stop, z - 1), body)
    return seq(Literal(gp[:c]), body)


def _nonneg_decimal(a: Decimal, b: Optional[Decimal]) -> Optional[Expr]:
    """Texts `I.F` (F nonempty) whose decimal value y satisfies a <= y <= b (a >= 0)."""
    ia, fa = _split(a)
    if b is None:
        opts = [seq(Literal(str(ia)), Literal("."), _frac_ge(fa) if fa else Repeat(DIGIT, 1, None))]
        rest = nonneg_range(ia + 1, None)
        if rest is not None:
            opts.append(seq(rest, Literal("."), Repeat(DIGIT, 1, None)))
        return alt(*opts)
    if b < a:
        return None
    ib, fb = _split(b)
    if ia == ib:
        f = _frac_between(fa, fb)
        return None if f is None else seq(Literal(str(ia)), Literal("."), f)
    opts = [seq(Literal(str(ia)), Literal("."), _frac_ge(fa) if fa else Repeat(DIGIT, 1, None))]
    mid = nonneg_range(ia + 1, ib - 1)
    if mid is not None:
        opts.append(seq(mid, Literal("."), Repeat(DIGIT, 1, None)))
    opts.append(seq(Literal(str(ib)), Literal("."), _frac_le(fb, 0, allow_empty=False)))
    return alt(*opts)


def decimal_range(lo: float, hi: float) -> Optional[Expr]:
    """Texts `-?(0|[1-9][0-9]*)\\.[0-9]+` whose float value is in [lo, hi] (floats, maybe inf)."""
    if lo > hi:
        return None
    dlo = None if math.isinf(lo) else Decimal(repr(lo))
    dhi = None if math.isinf(hi) else Decimal(repr(hi))
    opts: list[Expr] = []
    if dhi is None or dhi >= 0:
        p = _nonneg_decimal(max(dlo, Decimal(0)) if dlo is not None else Decimal(0), dhi)
        if p is not None:
            opts.append(p)
    if dlo is None or dlo <= 0:
        n = _nonneg_decimal(max(-dhi, Decimal(0)) if dhi is not None else Decimal(0), -dlo if dlo is not None else None)
        if n is not None:
            opts.append(seq(Literal("-"), n))
    return alt(*opts) if opts else None


# ------------------------------------------------------------- multipleOf


def multiples(lo: Optional[int], hi: Optional[int], m: int, sink: RuleSink) -> Optional[Expr]:
    """Integer texts for multiples of m in [lo, hi], or raise ValueError when not feasible.

    Bounded ranges with few multiples are enumerated; half-infinite sides must start at
    0 or +-1 and use a residue automaton over the digits (one rule per residue).
    """
    m = abs(m)
    if m == 1:
        return int_range(lo, hi)
    if lo is not None and hi is not None:
        first = -(-lo // m) * m
        if first > hi:
            return None
        count = (hi - first) // m + 1
        if count <= MAX_ENUMERATED_MULTIPLES:
            return alt(*[Literal(str(v)) for v in range(first, hi + 1, m)])
    opts: list[Expr] = []
    for sign, a, b in (("", lo, hi), ("-", None if hi is None else -hi, None if lo is None else -lo)):
        # side y >= 0 with y in [a', b'] where the side's value is sign*y
        a2 = 0 if a is None else max(a, 0)
        if b is not None and b < a2:
            continue
        if b is not None:
            first = -(-a2 // m) * m
            if first > b:
                continue
            if (b - first) // m + 1 > MAX_ENUMERATED_MULTIPLES:
                raise ValueError("too many multiples in a bounded range to enumerate")
            opts.append(seq(Literal(sign), alt(*[Literal(str(v)) for v in range(first, b + 1, m)])))
            continue
        if a2 > 1:
            raise ValueError("a lower bound other than 0 or 1 combined with multipleOf")
        if m > MAX_MODULUS:
            raise ValueError(f"multipleOf {m} is too large for a residue automaton (max {MAX_MODULUS})")
        zero_ok = a2 == 0
        opts.append(seq(Literal(sign), _residue_automaton(m, zero_ok, sink)))
    return alt(*opts) if opts else None


def _residue_automaton(m: int, zero_ok: bool, sink: RuleSink) -> Expr:
    """Canonical digit strings of multiples of m (0 included when zero_ok)."""
    names: dict[int, RuleRef] = {}
    bodies: dict[int, Expr] = {}
    for r in range(m):
        names[r] = RuleRef(sink.fresh(f"mod{m}-r{r}"))
    for r in range(m):
        groups: dict[int, list[int]] = {}
        for d in range(10):
            groups.setdefault((10 * r + d) % m, []).append(d)
        opts: list[Expr] = [EMPTY] if r == 0 else []
        for t, ds in groups.items():
            cls = CharClass(tuple((48 + d, 48 + d) for d in ds))
            opts.append(seq(cls, names[t]))
        bodies[r] = alt(*opts)
    for r in range(m):
        sink.define(names[r].name, bodies[r])
    first: list[Expr] = [Literal("0")] if zero_ok else []
    groups2: dict[int, list[int]] = {}
    for d in range(1, 10):
        groups2.setdefault(d % m, []).append(d)
    for t, ds in groups2.items():
        first.append(seq(CharClass(tuple((48 + d, 48 + d) for d in ds)), names[t]))
    return alt(*first)


# ------------------------------------------------------------- decimal steps


def as_decimal(x: Any) -> Decimal:
    """The decimal a JSON number stands for: an int exactly, a float as its shortest repr."""
    return Decimal(repr(x)) if isinstance(x, float) else Decimal(x)


def step_of(m: Any) -> tuple[int, int]:
    """(p, s) with m = p / 10**s, p a positive integer."""
    _, digits, exp = as_decimal(m).normalize().as_tuple()
    p = int("".join(map(str, digits)))
    assert isinstance(exp, int)
    return (p * 10**exp, 0) if exp >= 0 else (p, -exp)


def decimal_lcm(a: Any, b: Any) -> Optional[Any]:
    """The least common multiple of two steps, as a JSON number (None when it has no float
    that reads back as itself)."""
    (pa, sa), (pb, sb) = step_of(a), step_of(b)
    s = max(sa, sb)
    qa, qb = pa * 10 ** (s - sa), pb * 10 ** (s - sb)
    n = qa * qb // math.gcd(qa, qb)
    if s == 0:
        return n
    value = Decimal(n).scaleb(-s)
    f = float(value)
    return f if as_decimal(f) == value.normalize() else None
