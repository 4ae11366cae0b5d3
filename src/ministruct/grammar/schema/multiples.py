"""`multipleOf` with any step (0.01, 2.5, 7), and its negation, exact on the digits.

A step m is read as the decimal it is written as (m = p / 10**s: 0.01 is 1 / 10**2), and a
number text is a multiple when its value times 10**s is an integer divisible by p: a
condition on the digits a machine reads left to right, keeping the remainder so far.
That machine, run beside the automaton of the numbers the bounds allow (numbers.py),
writes one rule per class of live (bound state, fraction digits read, remainders)
combinations (states no digits that follow tell apart are one rule); past
MAX_MULTIPLE_STATES rules, or MAX_EXPLORED combinations, the schema is refused by pointer.
Several steps are one first: multiples of each wanted step are the multiples of their
least common multiple L, and "not a multiple of q" among those is "not of lcm(L, q)".

The standard's meaning, not the `jsonschema` package's: JSON Schema says a number is
valid when dividing it by the step gives an integer; the package (like ajv) divides
floats, so `0.07 / 0.01` gives 7.000000000000001 and it calls 0.07 invalid. Here 0.07 is
a multiple of 0.01, as the standard says. So that a text's digits and the float a
validator reads from them agree, generated numbers have at most 15 significant digits
(every such decimal reads back as itself), and `exact_multiple_of` is the keyword the
project's validators use (`check`, the compiler's own checks): the step and the instance
are compared as the shortest decimals that read as their floats.
"""

from __future__ import annotations

import math
from fractions import Fraction
from typing import Any, Callable, Optional

from ministruct.grammar.ir import EMPTY, CharClass, Expr, RuleRef, alt, seq
from ministruct.grammar.schema.complement import ComplementError, build_dfa
from ministruct.grammar.schema.merge import KEY_PARTS, NOT_MULTIPLE_OF, WITNESSES
from ministruct.grammar.schema.numbers import as_decimal, step_of

MAX_MULTIPLE_STATES = 4000
MAX_EXPLORED = 5 * MAX_MULTIPLE_STATES  # combinations looked at before the machine is minimized
MAX_SCHEMA_MULTIPLE_STATES = 8000  # the machines of one schema together
SIGNIFICANT_DIGITS = 15  # decimals of at most 15 digits read back from a float as themselves
_CHARS = "-.0123456789"


class MultipleTooLarge(ValueError):
    """The machine for these steps and bounds would need more than MAX_MULTIPLE_STATES states."""


def integer_step(p: int, s: int) -> int:
    """The step of the integers that are multiples of p / 10**s."""
    return p // math.gcd(p, 10**s)


def exact_multiple_of(validator: Any, step: Any, instance: Any, schema: Any) -> Any:
    """`multipleOf` for a jsonschema validator class, with the standard's meaning (see the module)."""
    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "number"):
        return
    if isinstance(step, float) or isinstance(instance, float):
        if isinstance(instance, float) and not math.isfinite(instance):
            failed = True
        else:
            failed = (Fraction(as_decimal(instance)) / Fraction(as_decimal(step))).denominator != 1
    else:
        failed = bool(instance % step)
    if failed:
        yield ValidationError(f"{instance!r} is not a multiple of {step}")


def _not_multiple_of(validator: Any, steps: Any, instance: Any, schema: Any) -> Any:
    """NOT_MULTIPLE_OF (the negations logic.py writes), for the compiler's own checks."""
    from jsonschema.exceptions import ValidationError

    for step in steps:
        if not any(exact_multiple_of(validator, step, instance, schema)) and validator.is_type(instance, "number"):
            yield ValidationError(f"{instance!r} is a multiple of {step}")


def _witnesses(validator: Any, pairs: Any, instance: Any, schema: Any) -> Any:
    """WITNESSES (logic.py): for each [pattern, schema], some property whose name the
    pattern finds has a value valid under the schema."""
    import re

    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    for pat, sub in pairs:
        if not any(re.search(pat, k) and validator.evolve(schema=sub).is_valid(v) for k, v in instance.items()):
            yield ValidationError(f"no property named by {pat!r} has a value valid under {sub!r}")


def _key_parts(validator: Any, pairs: Any, instance: Any, schema: Any) -> Any:
    """KEY_PARTS (merge.py): each name the node's `properties` does not list meets, for each
    pair, the schemas of the patterns that find it, or else the pair's additionalProperties."""
    import re

    from jsonschema.exceptions import ValidationError

    if not validator.is_type(instance, "object"):
        return
    listed = schema.get("properties") or {}
    for k, v in instance.items():
        if k in listed:
            continue
        for pp, ap in pairs:
            for sub in [s for p, s in pp.items() if re.search(p, k)] or [ap]:
                if not validator.evolve(schema=sub).is_valid(v):
                    yield ValidationError(f"property {k!r} fails {sub!r}")


def exact_validator(cls: Any) -> Any:
    """The jsonschema validator class `cls` with `exact_multiple_of` as its multipleOf."""
    from jsonschema import validators

    return validators.extend(
        cls,
        {
            "multipleOf": exact_multiple_of,
            NOT_MULTIPLE_OF: _not_multiple_of,
            WITNESSES: _witnesses,
            KEY_PARTS: _key_parts,
        },
    )


def magnitude_cap(steps: list[tuple[int, int, bool]]) -> tuple[int, int]:
    """(F, cap): fraction digits at most F and integer parts below `cap` keep every generated
    number within SIGNIFICANT_DIGITS digits."""
    f = min(SIGNIFICANT_DIGITS - 1, max(x[1] for x in steps) + 3)
    return f, 10 ** (SIGNIFICANT_DIGITS - f)


def multiples_expr(
    numbers: Expr,
    steps: list[tuple[int, int, bool]],
    fresh: Callable[[str], str],
    define: Callable[[str, Expr], None],
    max_states: int = MAX_MULTIPLE_STATES,
) -> Optional[Expr]:
    """The texts of `numbers` (plain decimal texts, no exponent) that are multiples of each
    step (p, s, True) and of no step (p, s, False), with at most magnitude_cap()'s fraction
    digits; None when there is none. MultipleTooLarge past MAX_MULTIPLE_STATES states."""
    big_s = max(s for _, s, _ in steps)
    most_fraction, _ = magnitude_cap(steps)
    simple = one_step_each(
        [p * 10 ** (big_s - s) for p, s, w in steps if w], [p * 10 ** (big_s - s) for p, s, w in steps if not w]
    )
    if simple is None:
        return None
    mods, wants = simple
    try:
        dfa = build_dfa([numbers], max_states=max_states)
    except ComplementError as e:
        raise MultipleTooLarge(str(e)) from None
    step_on: list[dict[str, int]] = []
    for edges in dfa.states:
        out = {}
        for ch in _CHARS:
            for ranges, t in edges:
                if t != dfa.free and any(a <= ord(ch) <= b for a, b in ranges):
                    out[ch] = t
        step_on.append(out)

    # a state: (bound state, fraction digits read or -1 before the point, remainders, a
    # nonzero digit past big_s fraction digits)
    State = tuple[int, int, tuple[int, ...], bool]

    def accepting(st: State) -> bool:
        d, k, rs, nz = st
        if not dfa.labels[d] or k == 0:
            return False
        scale = 10 ** (big_s - max(k, 0)) if k <= big_s else 1
        for r, q, want in zip(rs, mods, wants):
            multiple = not nz and (r * scale) % q == 0
            if multiple != want:
                return False
        return True

    def moves(st: State) -> dict[str, State]:
        d, k, rs, nz = st
        out: dict[str, State] = {}
        for ch, t in step_on[d].items():
            if ch == "-":
                out[ch] = (t, k, rs, nz)
            elif ch == ".":
                if k == -1:
                    out[ch] = (t, 0, rs, nz)
            elif k < big_s:
                c = ord(ch) - 48
                out[ch] = (t, k + 1 if k >= 0 else -1, tuple((10 * r + c) % q for r, q in zip(rs, mods)), nz)
            elif k < most_fraction:  # digits past the steps' own: a multiple has only zeros there
                out[ch] = (t, k + 1, rs, nz or ch != "0")
        return out

    start: State = (0, -1, tuple(0 for _ in mods), False)
    graph: dict[State, dict[str, State]] = {}
    todo = [start]
    explored = max(max_states, MAX_EXPLORED * max_states // MAX_MULTIPLE_STATES)
    while todo:
        st = todo.pop()
        if st in graph:
            continue
        if len(graph) >= explored:
            raise MultipleTooLarge(f"more than {explored} states before minimizing")
        graph[st] = moves(st)
        todo.extend(graph[st].values())
    live = {st for st in graph if accepting(st)}
    changed = True
    while changed:
        changed = False
        for st, nxt in graph.items():
            if st not in live and any(t in live for t in nxt.values()):
                live.add(st)
                changed = True
    if start not in live:
        return None
    edges = {st: {ch: t for ch, t in graph[st].items() if t in live} for st in live}
    block = minimal_blocks(edges, {st: accepting(st) for st in live})
    if len(set(block.values())) > max_states:
        raise MultipleTooLarge(f"more than {max_states} states")
    names: dict[int, str] = {}
    for st in sorted(live, key=lambda x: x != start):  # (the start's rule first)
        b = block[st]
        if b in names:
            continue
        names[b] = fresh("multiple")
    written: set[int] = set()
    for st in live:
        b = block[st]
        if b in written:
            continue
        written.add(b)
        by_target: dict[int, list[int]] = {}
        for ch, t in edges[st].items():
            by_target.setdefault(block[t], []).append(ord(ch))
        opts: list[Expr] = [EMPTY] if accepting(st) else []
        for t, cps in by_target.items():
            opts.append(seq(CharClass(tuple((c, c) for c in sorted(cps))), RuleRef(names[t])))
        define(names[b], alt(*opts))
    return RuleRef(names[block[start]])


def one_step_each(wanted: list[int], unwanted: list[int]) -> Optional[tuple[list[int], list[bool]]]:
    """Integer steps (the number times 10**s is a multiple of each `wanted` and of no
    `unwanted`) as one wanted step, their least common multiple L, and the fewest unwanted
    ones (lcm(L, q) for each q; one that a smaller one divides says nothing more), as
    (mods, wants); None when no number meets them (L is a multiple of an unwanted step)."""
    big = math.lcm(*wanted) if wanted else 1
    nots = sorted({math.lcm(big, q) for q in unwanted})
    if wanted and big in nots:
        return None
    nots = [q for q in nots if not any(o != q and q % o == 0 for o in nots)]
    return ([big] if wanted else []) + nots, [True] * bool(wanted) + [False] * len(nots)


def minimal_blocks(edges: dict[Any, dict[str, Any]], final: dict[Any, bool]) -> dict[Any, int]:
    """For each state of a deterministic machine (edges: state -> char -> state, missing
    edges fail), the number of its class: states no text that follows tells apart
    (Moore's refinement)."""
    block = {st: int(f) for st, f in final.items()}
    count = len(set(block.values()))
    while True:
        sigs: dict[tuple, int] = {}
        nxt = {}
        for st, out in edges.items():
            sig = (block[st], tuple(sorted((ch, block[t]) for ch, t in out.items())))
            nxt[st] = sigs.setdefault(sig, len(sigs))
        block = nxt
        if len(sigs) == count:
            return block
        count = len(sigs)


def read_steps(c: Any, node: dict, ptr: str) -> list[tuple[int, int, bool]]:
    """The node's `multipleOf` (a multiple) and NOT_MULTIPLE_OF steps (not one), as (p, s, want)."""
    steps = []
    for m, want in [(node["multipleOf"], True)] if "multipleOf" in node else []:
        steps.append((m, want))
    steps += [(m, False) for m in node.get(NOT_MULTIPLE_OF, [])]
    out = []
    for m, want in steps:
        if isinstance(m, bool) or not isinstance(m, (int, float)) or m <= 0 or not math.isfinite(m):
            raise c.error("multipleOf must be a positive number", f"{ptr}/multipleOf", "multipleOf")
        out.append((*step_of(m), want))
    return out


def number_multiples(
    c: Any,
    steps: list[tuple[int, int, bool]],
    int_ranges: list[tuple[Optional[int], Optional[int]]],
    float_ranges: Callable[[float, float], list[Expr]],
    integer: bool,
    ptr: str,
) -> Optional[Expr]:
    """The number texts in the node's ranges that meet its steps (None: none, or not enforced
    past the limit with lenient=True). `float_ranges(lo, hi)`: the non-integer texts of the
    bounds within [lo, hi]."""
    from ministruct.grammar.schema import numbers as num

    if integer or all(want and s == 0 for _, s, want in steps):
        # integers only: a step p/10**s holds for an integer when integer_step(p, s) does
        steps = [(integer_step(p, s), 0, want) for p, s, want in steps]
        wanted = [p for p, _, want in steps if want]
        if len(steps) == 1 and wanted:
            try:
                return _alt(*(num.multiples(a, z, wanted[0], c) for a, z in int_ranges))
            except ValueError:
                pass  # past what enumerating or one residue machine does: the general machine
        numbers: Optional[Expr] = _alt(*(num.int_range(a, z) for a, z in int_ranges))
    else:
        _, cap = magnitude_cap(steps)
        clipped = [
            (max(a, 1 - cap) if a is not None else 1 - cap, min(z, cap - 1) if z is not None else cap - 1)
            for a, z in int_ranges
        ]
        ints = [num.int_range(a, z) for a, z in clipped if a <= z]
        numbers = _alt(*ints, *float_ranges(-float(cap), float(cap)))
    if numbers is None:
        return None
    key = (numbers, tuple(sorted(set(steps))))
    if key in c.multiples_made:  # the same numbers and steps elsewhere in the schema: one machine
        return c.multiples_made[key]
    made = 0

    def fresh(hint: str) -> str:
        nonlocal made
        made += 1
        return c.fresh(hint)

    left = MAX_SCHEMA_MULTIPLE_STATES - c.multiple_states
    try:
        got = multiples_expr(numbers, steps, fresh, c.define, min(MAX_MULTIPLE_STATES, left))
    except MultipleTooLarge as e:
        c.unsupported("multipleOf", ptr, f"with these bounds needs a machine of {e} (the limit)")
        return numbers
    finally:
        c.multiple_states += made
    c.multiples_made[key] = got
    return got


def _alt(*opts: Optional[Expr]) -> Optional[Expr]:
    live = [o for o in opts if o is not None]
    return alt(*live) if live else None
