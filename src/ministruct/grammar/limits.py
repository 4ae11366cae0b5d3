"""Bounded work for every grammar: refuse what is too large before building anything,
and reshape what is merely deep or shared so that compiling it stays linear.

- `nesting_error(value)`: the JSON pointer where a parsed JSON value nests deeper than
  MAX_JSON_NESTING (the schema compiler and the engine recurse per level);
  `text_nesting_pointer(text)` finds it in JSON text too deep for `json.loads`.
- `bounded(grammar)`: the same language with (1) sub-expressions used more than once
  and large hoisted into rules of their own (the engine inlines an expression at every
  use, so a nested-array schema, whose item appears twice per level, would otherwise
  grow as 2^depth) and (2) expressions nested deeper than MAX_HEIGHT cut into rules (the
  engine's builders recurse per level). It then refuses, as a CompileLimitError naming
  the place, a repetition count above MAX_REPEAT or an automaton estimated above
  MAX_STATES.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any, Callable

from ministruct.errors import CompileLimitError
from ministruct.grammar.ir import Alt, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, Seq, format_expr

MAX_REPEAT = 100_000  # the largest count of a repetition (a{n}, maxLength, maxItems)
MAX_STATES = 2_000_000  # the engine's own ceiling (engine.nfa.MAX_NFA_STATES)
MAX_JSON_NESTING = 128  # JSON containers inside each other in a schema
MAX_HEIGHT = 48  # expression levels inside one rule before the rest becomes a rule
SHARE_MIN_STATES = 24  # a shared expression at least this large becomes a rule ...
SHARE_WHEN_TOTAL = 20_000  # ... once the grammar, fully inlined, is estimated this large
SHARED_ITEM_STATES = 6  # the engine calls (not copies) a repeated item this large


# ---------------------------------------------------------------- JSON nesting


def nesting_error(value: Any, limit: int = MAX_JSON_NESTING) -> str | None:
    """The JSON pointer of the first container nested deeper than `limit`, else None."""
    stack: list[tuple[Any, str, int]] = [(value, "", 0)]
    while stack:
        v, ptr, depth = stack.pop()
        if isinstance(v, dict):
            items = ((str(k), x) for k, x in v.items())
        elif isinstance(v, list):
            items = ((str(i), x) for i, x in enumerate(v))
        else:
            continue
        if depth >= limit:
            return ptr or "/"
        for k, x in items:
            if isinstance(x, (dict, list)):
                stack.append((x, f"{ptr}/{pointer_token(k)}", depth + 1))
    return None


def pointer_token(token: str) -> str:
    """A key as one JSON Pointer token (RFC 6901: `~` as `~0`, `/` as `~1`)."""
    return token.replace("~", "~0").replace("/", "~1")


def pointer_key(token: str) -> str:
    """The key a JSON Pointer token stands for (the inverse of pointer_token)."""
    return token.replace("~1", "/").replace("~0", "~")


_JSON_TOKEN = re.compile(r'"(?:[^"\\]|\\.)*"|[{}\[\],:]', re.S)


def text_nesting_pointer(text: str, limit: int = MAX_JSON_NESTING) -> str | None:
    """Like `nesting_error`, on JSON text (for texts `json.loads` cannot nest into)."""
    stack: list[list] = []  # per open container: [is_object, key or index, expecting a key]
    for m in _JSON_TOKEN.finditer(text):
        tok = m.group(0)
        if tok[0] == '"':
            if stack and stack[-1][0] and stack[-1][2]:
                try:
                    stack[-1][1] = json.loads(tok)
                except ValueError:
                    return None
                stack[-1][2] = False
        elif tok in "{[":
            if len(stack) >= limit:
                return "".join(f"/{pointer_token(str(f[1]))}" for f in stack) or "/"
            stack.append([tok == "{", None if tok == "{" else 0, tok == "{"])
        elif tok in "}]":
            if not stack:
                return None
            stack.pop()
        elif tok == "," and stack:
            if stack[-1][0]:
                stack[-1][2] = True
            else:
                stack[-1][1] += 1
    return None


def short_pointer(ptr: str, keep: int = 6) -> str:
    """A long pointer with its middle elided, for one-line messages."""
    parts = ptr.split("/")
    if len(parts) <= 2 * keep + 1:
        return ptr
    return "/".join(parts[: keep + 1] + [f"...({len(parts) - 2 * keep - 1} more)..."] + parts[-keep:])


# ---------------------------------------------------------------- grammar size and shape


def _children(e: Expr) -> tuple[Expr, ...]:
    t = type(e)
    if t is Seq:
        return e.items  # type: ignore[union-attr]
    if t is Alt:
        return e.options  # type: ignore[union-attr]
    if t is Repeat:
        return (e.item,)  # type: ignore[union-attr]
    return ()


def _leaf_states(e: Expr) -> int:
    t = type(e)
    if t is Literal:
        return len(e.text.encode("utf-8", "surrogatepass")) + 1  # type: ignore[union-attr]
    if t is CharClass:
        return 4 * max(1, len(e.ranges)) + 2  # type: ignore[union-attr]
    return 2  # RuleRef, TokenRef


def _combine(e: Expr, kids: list[int]) -> int:
    """Estimated automaton states of `e` from its children's (as the engine builds it)."""
    t = type(e)
    if t is Seq:
        return sum(kids) + 1
    if t is Alt:
        return sum(kids) + 2
    if t is Repeat:
        return _repeat_states(e, kids[0])  # type: ignore[arg-type]
    return _leaf_states(e)


def _repeat_states(e: Repeat, inner: int) -> int:
    copies = e.min + 1 if e.max is None else max(e.max, 1)
    if copies >= 2 and inner >= SHARED_ITEM_STATES:
        return inner + 2 * copies + 2
    return inner * copies + 2


def _postorder(roots: list[Expr]) -> list[Expr]:
    """Every distinct (by identity) expression below `roots`, children before parents."""
    order: list[Expr] = []
    seen: set[int] = set()
    stack: list[tuple[Expr, bool]] = [(r, False) for r in reversed(roots)]
    pop, push, add, emit = stack.pop, stack.append, seen.add, order.append
    while stack:
        e, expanded = pop()
        if expanded:
            emit(e)
            continue
        i = id(e)
        if i in seen:
            continue
        add(i)
        kids = _children(e)
        if not kids:
            emit(e)  # a leaf: nothing below it
            continue
        push((e, True))
        for c in reversed(kids):
            if id(c) not in seen:
                push((c, False))
    return order


def _sizes(order: list[Expr]) -> dict[int, int]:
    """Estimated states per expression of a `_postorder` (by identity), each counted at each use."""
    size: dict[int, int] = {}
    for e in order:
        size[id(e)] = _combine(e, [size[id(c)] for c in _children(e)])
    return size


def estimated_states(rules: dict[str, Expr], order: list[Expr] | None = None) -> int:
    """The engine's estimate of automaton states, every expression counted at each use
    (`order`: the rules' `_postorder`, when the caller has it)."""
    size = _sizes(_postorder(list(rules.values())) if order is None else order)
    return sum(size[id(b)] for b in rules.values())


@dataclasses.dataclass(frozen=True)
class _Size:
    """What `check_limits` needs of a grammar: its estimated states and whether a
    repetition counts past MAX_REPEAT."""

    states: int
    too_many: bool


def _too_many(order: list[Expr]) -> bool:
    return any(type(e) is Repeat and max(e.min, e.max or 0) > MAX_REPEAT for e in order)  # type: ignore[union-attr]


def reshape(rules: dict[str, Expr], fresh: Callable[[str], str]) -> dict[str, Expr]:
    """`rules` with large shared expressions and over-deep ones moved into new rules
    (named by `fresh(hint)`); the language is unchanged. Returns the new rules dict."""
    return reshape_sized(rules, fresh)[0]


def reshape_sized(rules: dict[str, Expr], fresh: Callable[[str], str]) -> tuple[dict[str, Expr], _Size]:
    """`reshape`, with the result's `_Size` (as `estimated_states` would count it)."""
    original = list(rules.items())  # `fresh` may add names to `rules` itself
    order = _postorder([b for _, b in original])
    size = _sizes(order)
    share = sum(size[id(b)] for _, b in original) > SHARE_WHEN_TOTAL
    uses: dict[int, int] = {}
    if share:
        for e in order:
            for c in _children(e):
                uses[id(c)] = uses.get(id(c), 0) + 1
    new: dict[int, Expr] = {}
    height: dict[int, int] = {}
    states: dict[int, int] = {}  # as `size`, but a hoisted expression counts as the reference to it
    hoisted: dict[str, Expr] = {}
    hoisted_states = 0
    for e in order:
        kids = _children(e)
        i = id(e)
        if not kids:
            new[i], height[i], states[i] = e, 1, size[i]
            continue
        nk = [new[id(c)] for c in kids]
        ne = e if all(a is b for a, b in zip(nk, kids)) else _rebuild(e, nk)
        h = 1 + max([height[id(c)] for c in kids])
        st = size[i] if ne is e else _combine(e, [states[id(c)] for c in kids])
        if h > MAX_HEIGHT or (share and uses.get(i, 0) > 1 and st >= SHARE_MIN_STATES):
            name = fresh("nested" if h > MAX_HEIGHT else "shared")
            hoisted[name] = ne
            hoisted_states += st
            ne, h, st = RuleRef(name), 1, 2
        new[i], height[i], states[i] = ne, h, st
    out = {name: new[id(body)] for name, body in original}
    out.update(hoisted)
    total = sum(states[id(body)] for _, body in original) + hoisted_states
    return out, _Size(total, _too_many(order))


def _rebuild(e: Expr, kids: list[Expr]) -> Expr:
    if isinstance(e, Seq):
        return Seq(tuple(kids))
    if isinstance(e, Alt):
        return Alt(tuple(kids))
    assert isinstance(e, Repeat)
    return Repeat(kids[0], e.min, e.max)


def fresh_namer(rules: dict[str, Expr]) -> Callable[[str], str]:
    """A `fresh(hint)` giving names not in `rules` (nor given before)."""
    taken = set(rules)
    counter = [0]

    def fresh(hint: str) -> str:
        while True:
            counter[0] += 1
            name = f"{hint}-{counter[0]}"
            if name not in taken:
                taken.add(name)
                return name

    return fresh


def check_limits(grammar: Grammar, size: "_Size | None" = None) -> None:
    """CompileLimitError naming the place when a repetition count or the whole automaton
    is beyond the limits (nothing is built). `size`: the grammar's, when `reshape_sized` said it."""
    if size is None:
        order = _postorder(list(grammar.rules.values()))
        size = _Size(estimated_states(grammar.rules, order), _too_many(order))
    for name, body in grammar.rules.items() if size.too_many else ():  # (the first rule that has one, named)
        for e in _postorder([body]):
            if isinstance(e, Repeat) and max(e.min, e.max or 0) > MAX_REPEAT:
                count = max(e.min, e.max or 0)
                what = _snippet(e)
                raise CompileLimitError(
                    f"{grammar.source}: rule '{name}': repetition {what} counts {count:,}, beyond the limit "
                    f"of {MAX_REPEAT:,}"
                )
    total = size.states
    if total > MAX_STATES:
        states = {n: estimated_states({n: b}) for n, b in grammar.rules.items()}
        big = max(states, key=states.__getitem__)
        raise CompileLimitError(
            f"{grammar.source}: grammar too large to compile (about {total:,} automaton states, the limit is "
            f"{MAX_STATES:,}); the largest rule is '{big}' (about {states[big]:,})"
        )


def _snippet(e: Expr, width: int = 40) -> str:
    try:
        text = format_expr(e)
    except (ValueError, RecursionError):
        return "(...)"
    return text if len(text) <= width else text[: width - 3] + "..."


# rules dicts `reshape` made and nothing changed since (by identity, with their bodies):
# `bounded` does not reshape them again (a schema's grammar is reshaped where it is made)
_RESHAPED: "dict[int, tuple[dict[str, Expr], tuple[tuple[str, Expr], ...], _Size | None]]" = {}
_RESHAPED_KEPT = 16


def mark_reshaped(rules: dict[str, Expr], size: "_Size | None" = None) -> None:
    """Note that `rules` is in `reshape`'s form (it would change nothing), and of `size`
    when given (`reshape_sized`'s): `bounded` only checks it, while the dict holds the same bodies."""
    if len(_RESHAPED) >= _RESHAPED_KEPT:
        del _RESHAPED[next(iter(_RESHAPED))]
    _RESHAPED[id(rules)] = (rules, tuple(rules.items()), size)  # (the bodies held: no id reused)


def _known_reshaped(rules: dict[str, Expr]) -> "tuple[bool, _Size | None]":
    """Whether `rules` is marked (and unchanged since), and its size when known."""
    hit = _RESHAPED.get(id(rules))
    if hit is not None and hit[0] is rules and len(hit[1]) == len(rules) and all(rules.get(n) is b for n, b in hit[1]):
        return True, hit[2]
    return False, None


def bounded(grammar: Grammar) -> Grammar:
    """The grammar reshaped (see `reshape`) and checked (see `check_limits`)."""
    known, size = _known_reshaped(grammar.rules)
    if known:
        check_limits(grammar, size)
        return grammar
    rules, size = reshape_sized(grammar.rules, fresh_namer(grammar.rules))
    same = len(rules) == len(grammar.rules) and all(rules[n] is b for n, b in grammar.rules.items())
    g = grammar if same else dataclasses.replace(grammar, rules=rules)
    check_limits(g, size)
    return g


__all__ = [
    "bounded",
    "mark_reshaped",
    "check_limits",
    "estimated_states",
    "nesting_error",
    "reshape",
    "reshape_sized",
    "text_nesting_pointer",
    "short_pointer",
    "MAX_REPEAT",
    "MAX_STATES",
    "MAX_JSON_NESTING",
]
