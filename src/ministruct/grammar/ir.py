"""The grammar IR every front end produces and the engine compiles.

Expressions are over Unicode code points (as in llama.cpp's GBNF, Python's `re`
and JSON); the engine encodes them to UTF-8 byte automata. Token references
(`<[N]>`, `!<[N]>`, `<|name|>`) match one whole vocabulary token.

A Grammar prints as canonical GBNF; parsing that text gives back an equal Grammar.
"""

from __future__ import annotations

import gc
from contextlib import contextmanager
from dataclasses import dataclass, field
from functools import lru_cache
from typing import Callable, Iterator, Union

from ministruct.errors import UsageError

MAX_CODE_POINT = 0x10FFFF


@dataclass(frozen=True)
class Literal:
    """An exact string; the empty string matches nothing but itself (epsilon)."""

    text: str


@dataclass(frozen=True)
class CharClass:
    """One code point from sorted, disjoint, inclusive ranges (complemented when negated).

    `.` in GBNF is CharClass((), negated=True): any code point.
    """

    ranges: tuple[tuple[int, int], ...]
    negated: bool = False

    def __hash__(self) -> int:  # (kept: a class of many ranges is hashed at every use)
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash((self.ranges, self.negated))
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if not k.startswith("_")}

    def code_point_ranges(self) -> tuple[tuple[int, int], ...]:
        """The matched code points as positive ranges (negation resolved)."""
        got = self.__dict__.get("_positive")
        if got is None:
            got = self._positive_ranges()
            object.__setattr__(self, "_positive", got)
        return got

    def _positive_ranges(self) -> tuple[tuple[int, int], ...]:
        rs = normalize_ranges(self.ranges)
        if not self.negated:
            return rs
        out: list[tuple[int, int]] = []
        lo = 0
        for a, b in rs:
            if a > lo:
                out.append((lo, a - 1))
            lo = b + 1
        if lo <= MAX_CODE_POINT:
            out.append((lo, MAX_CODE_POINT))
        return tuple(out)


class _HashOnce:
    """Composite expressions share sub-expressions (a DAG), so a hash recomputed from the
    children at every use is exponential in the nesting: compute it once per object."""

    def _hash_once(self, key: tuple) -> int:
        h = self.__dict__.get("_hash")
        if h is None:
            h = hash(key)
            object.__setattr__(self, "_hash", h)
        return h

    def __getstate__(self) -> dict:
        return {k: v for k, v in self.__dict__.items() if k != "_hash"}  # str hashes differ per process

    def _dag_eq(self, other: object) -> bool:
        """Structural equality visiting each pair of shared nodes once (not once per path)."""
        if self is other:
            return True
        if type(other) is not type(self):
            return NotImplemented  # type: ignore[return-value]
        seen: set[tuple[int, int]] = set()
        stack: list[tuple[object, object]] = [(self, other)]
        while stack:
            a, b = stack.pop()
            if a is b or (id(a), id(b)) in seen:
                continue
            if type(a) is not type(b):
                return False
            if not isinstance(a, _HashOnce):
                if a != b:
                    return False
                continue
            if hash(a) != hash(b):
                return False
            seen.add((id(a), id(b)))
            if isinstance(a, Repeat):
                if (a.min, a.max) != (b.min, b.max):  # type: ignore[attr-defined]
                    return False
                stack.append((a.item, b.item))  # type: ignore[attr-defined]
                continue
            xs, ys = (a.items, b.items) if isinstance(a, Seq) else (a.options, b.options)  # type: ignore[attr-defined]
            if len(xs) != len(ys):
                return False
            stack.extend(zip(xs, ys))
        return True


@dataclass(frozen=True)
class Seq(_HashOnce):
    items: tuple["Expr", ...]

    def __hash__(self) -> int:
        return self._hash_once((Seq, self.items))

    __eq__ = _HashOnce._dag_eq


@dataclass(frozen=True)
class Alt(_HashOnce):
    options: tuple["Expr", ...]

    def __hash__(self) -> int:
        return self._hash_once((Alt, self.options))

    __eq__ = _HashOnce._dag_eq


@dataclass(frozen=True)
class Repeat(_HashOnce):
    """`item` between `min` and `max` times; `max=None` means unbounded."""

    item: "Expr"
    min: int
    max: int | None

    def __hash__(self) -> int:
        return self._hash_once((Repeat, self.item, self.min, self.max))

    __eq__ = _HashOnce._dag_eq


@dataclass(frozen=True)
class RuleRef:
    name: str


@dataclass(frozen=True)
class TokenRef:
    """One whole token: by id (`<[N]>`) or by its text (`<|name|>`); negated matches any other token."""

    token_id: int | None = None
    name: str | None = None
    negated: bool = False


Expr = Union[Literal, CharClass, Seq, Alt, Repeat, RuleRef, TokenRef]

EMPTY = Literal("")
NOTHING = CharClass(())  # the empty language


@dataclass(frozen=True)
class Boundary:
    """Where free text ends and the constrained part begins (grammar/think.py builds it).

    `close` is the text (or the one control token) that ends the free text; `open` the
    text announced to start it (optional in the language); `may_end_in_free_text`: the
    output may also stop in the free text. `free_grammar`: the free text is a grammar of
    its own (not "any text without CLOSE")."""

    close: str | TokenRef
    open: str | None = None
    may_end_in_free_text: bool = False
    free_grammar: bool = False

    @property
    def close_text(self) -> str:
        """CLOSE as text (a control token by its name or id)."""
        if isinstance(self.close, str):
            return self.close
        return self.close.name if self.close.name is not None else f"<[{self.close.token_id}]>"


@dataclass(frozen=True)
class Mark:
    """What a rule's text is, for position tags (the JSON Schema front end leaves these).

    `segment`: the JSON pointer segment the rule adds (an object key, an array index,
    `*` for any item, KEY_SEGMENT for a member whose key the output names: an
    additional or pattern property), or None; `part`: "key", "value", "structure" or
    "whitespace", or None to keep the enclosing rule's. A stack's position joins the segments of every
    marked rule on it, bottom to top, and takes the innermost part.
    """

    segment: str | None = None
    part: str | None = None


@dataclass(frozen=True)
class Lexer:
    """Greedy lexemes (Lark's reading, as llguidance's): which rules are lexemes.

    Each rule in `lexemes` is one lexeme: it never matches the empty string, and a parse
    ends it only where the next byte continues no lexeme of any parse alive (or at the
    end of the text); a rule in `lazy` ends at its first match instead. `skip` names, per
    lexeme rule, the skip lexeme (`%ignore`) allowed before it, which leaves the parse
    where it was; `top_skip` is the one allowed at the end of the text (while some lexeme
    may still follow); `initial_skip`: skips before the first lexeme too. Without a Lexer
    a grammar is the context-free language over its characters.

    Lexeme classes (llguidance's: one per distinct `%ignore`, a nested `%lark` block's
    lexemes in its own unless its skip is its parent's): `classes` names each lexeme's
    class (none: every lexeme in class 0), `class_skips` each class's skip rule and
    `class_parents` the class of the grammar around it (-1: none). After a lexeme of class
    K ends, the one skip allowed is K's where a lexeme of class K may follow, else that of
    the nearest enclosing class with a lexeme that may follow."""

    lexemes: frozenset[str]
    lazy: frozenset[str] = frozenset()
    skip: tuple[tuple[str, str], ...] = ()
    top_skip: str | None = None
    initial_skip: bool = False
    classes: tuple[tuple[str, int], ...] = ()
    class_skips: tuple[str | None, ...] = ()
    class_parents: tuple[int, ...] = ()

    def key(self) -> str:
        """Canonical text of the lexer, for cache keys."""
        return (
            "lexer greedy: "
            + " ".join(sorted(self.lexemes))
            + " | lazy: "
            + " ".join(sorted(self.lazy))
            + " | skip: "
            + " ".join(f"{a}>{b}" for a, b in sorted(self.skip))
            + f" | top {self.top_skip} | initial {self.initial_skip}"
            + (
                " | classes: "
                + " ".join(f"{a}>{k}" for a, k in sorted(self.classes))
                + f" skips {list(self.class_skips)} parents {list(self.class_parents)}"
                if self.classes
                else ""
            )
        )


KEY_SEGMENT = "~k"  # no escaped pointer segment is this ("~" is only ever "~0" or "~1")


@dataclass
class Grammar:
    """Named rules and a start rule. `warnings` holds analysis notes (unreachable rules...).

    `marks` (rule name -> Mark) is a side table for position tags; it does not change
    the language, and the engine keeps a frame for every marked rule on its stacks.
    `not_enforced`: the JSON pointers of schema keywords the grammar leaves out (a schema
    compiled with lenient=True): its strings need a check against the full schema. It
    says nothing of the language, so equality and the engine's cache key leave it out."""

    rules: dict[str, Expr]
    root: str = "root"
    source: str = "<grammar>"
    warnings: list[str] = field(default_factory=list)
    boundary: Boundary | None = None  # free text first, then the rest (grammar/think.py)
    marks: dict[str, Mark] = field(default_factory=dict)
    lexer: Lexer | None = None  # greedy lexemes (a Lark grammar's default reading)
    not_enforced: list[str] = field(default_factory=list)

    def to_gbnf(self) -> str:
        """Canonical GBNF text: root first, then the other rules in definition order."""
        order = [self.root] + [n for n in self.rules if n != self.root]
        return "".join(f"{n} ::= {format_expr(self.rules[n])}\n" for n in order if n in self.rules)

    @classmethod
    def from_choices(cls, choices: list[str], *, source: str = "<choice>") -> "Grammar":
        """Exactly one of the given strings."""
        if not isinstance(choices, (list, tuple)) or not all(isinstance(c, str) for c in choices):
            raise UsageError(f"choices must be a list of strings, got {choices!r:.80}", parameter="choices")
        if not choices:
            raise UsageError("choices must name at least one string", parameter="choices")
        return cls({"root": alt(*(Literal(c) for c in choices))}, source=source)

    def references(self) -> dict[str, set[str]]:
        """For each rule, the rule names its body refers to."""
        return {n: {r.name for r in walk(e) if isinstance(r, RuleRef)} for n, e in self.rules.items()}

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Grammar):
            return NotImplemented
        return self.rules == other.rules and self.root == other.root and self.lexer == other.lexer


# ---------------------------------------------------------------- helpers


@contextmanager
def gc_paused() -> Iterator[None]:
    """No cyclic GC while a large structure is built: its passes over the new objects free
    nothing. Afterwards the objects made meanwhile join the oldest generation at once (a
    freeze and unfreeze moves them without a pass); left in the youngest, the next two
    collections, in whatever runs next, would each traverse all of them. (Not when the
    program keeps objects frozen itself, e.g. before a fork: those must stay frozen.)"""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            if gc.get_freeze_count() == 0:
                gc.freeze()
                gc.unfreeze()
            gc.enable()


def normalize_ranges(ranges: "tuple[tuple[int, int], ...] | list[tuple[int, int]]") -> tuple[tuple[int, int], ...]:
    """Sort and merge overlapping or adjacent ranges."""
    out: list[list[int]] = []
    for a, b in sorted(ranges):
        if a > b:
            continue
        if out and a <= out[-1][1] + 1:
            out[-1][1] = max(out[-1][1], b)
        else:
            out.append([a, b])
    return tuple((a, b) for a, b in out)


def walk(e: Expr) -> Iterator[Expr]:
    """Every sub-expression of `e`, `e` included, depth first."""
    stack = [e]
    while stack:
        x = stack.pop()
        yield x
        if isinstance(x, Seq):
            stack.extend(x.items)
        elif isinstance(x, Alt):
            stack.extend(x.options)
        elif isinstance(x, Repeat):
            stack.append(x.item)


def seq(*items: Expr) -> Expr:
    """A sequence with nested sequences flattened and empty literals dropped."""
    flat: list[Expr] = []
    pending = list(items)
    pending.reverse()
    pop, keep = pending.pop, flat.append
    while pending:
        it = pop()
        t = type(it)
        if t is Seq:
            pending.extend(reversed(it.items))  # type: ignore[union-attr]
        elif t is not Literal:
            keep(it)
        elif not it.text:  # type: ignore[union-attr]
            continue
        elif flat and type(flat[-1]) is Literal:
            flat[-1] = Literal(flat[-1].text + it.text)  # type: ignore[union-attr]
        else:
            keep(it)
    if not flat:
        return EMPTY
    return flat[0] if len(flat) == 1 else Seq(tuple(flat))


def seq_all(*items: Expr) -> Expr:
    """seq(), or NOTHING when an item matches nothing."""
    return NOTHING if any(x == NOTHING for x in items) else seq(*items)


def alt_some(*options: Expr) -> Expr:
    """alt() of the options that match something (NOTHING when none does)."""
    kept = [o for o in options if o != NOTHING]
    return alt(*kept) if kept else NOTHING


def alt(*options: Expr) -> Expr:
    """An alternation with nested alternations flattened and duplicates removed."""
    flat: dict[Expr, None] = {}  # ordered and O(1) to test: alternations may have 100k options
    for o in options:
        for x in o.options if isinstance(o, Alt) else (o,):
            flat[x] = None
    if not flat:
        raise ValueError("alt() needs at least one option")
    return next(iter(flat)) if len(flat) == 1 else Alt(tuple(flat))


def rename_refs(e: Expr, names: dict[str, str], memo: dict[int, Expr]) -> Expr:
    """`e` with every RuleRef renamed through `names` (shared parts stay shared: `memo`
    maps each visited node to its renamed copy)."""
    return _replace_refs(e, lambda r: RuleRef(names[r.name]), memo)


def substitute_refs(e: Expr, exprs: dict[str, Expr], memo: dict[int, Expr]) -> Expr:
    """`e` with each RuleRef to a name of `exprs` replaced by its expression (others kept;
    `memo` as for rename_refs)."""
    return _replace_refs(e, lambda r: exprs.get(r.name, r), memo)


def _replace_refs(e: Expr, by: "Callable[[RuleRef], Expr]", memo: dict[int, Expr]) -> Expr:
    got = memo.get(id(e))
    if got is not None:
        return got
    if isinstance(e, RuleRef):
        out: Expr = by(e)
    elif isinstance(e, Seq):
        out = Seq(tuple(_replace_refs(x, by, memo) for x in e.items))
    elif isinstance(e, Alt):
        out = Alt(tuple(_replace_refs(x, by, memo) for x in e.options))
    elif isinstance(e, Repeat):
        out = Repeat(_replace_refs(e.item, by, memo), e.min, e.max)
    else:
        out = e
    memo[id(e)] = out
    return out


# ---------------------------------------------------------------- printing

_LIT_ESC = {ord('"'): '\\"', ord("\\"): "\\\\", 10: "\\n", 13: "\\r", 9: "\\t"}
_CLS_ESC = {ord("]"): "\\]", ord("\\"): "\\\\", ord("-"): "\\-", ord("^"): "\\x5E", 10: "\\n", 13: "\\r", 9: "\\t"}


def _escape_cp(cp: int, table: dict[int, str]) -> str:
    if cp in table:
        return table[cp]
    if cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF or 0x80 <= cp < 0xA0:
        return f"\\x{cp:02X}" if cp <= 0xFF else f"\\u{cp:04X}"
    if cp > MAX_CODE_POINT:
        raise ValueError(f"code point {cp:#x} out of range")
    return chr(cp)


@lru_cache(maxsize=4096)
def format_literal(text: str) -> str:
    return '"' + "".join(_escape_cp(ord(c), _LIT_ESC) for c in text) + '"'


@lru_cache(maxsize=4096)
def format_class(c: CharClass) -> str:
    # (cached: the same classes, a JSON string's characters, are in every schema's grammar)
    if c.negated and not c.ranges:
        return "."
    if not c.negated and not normalize_ranges(c.ranges):
        return "[^\\x00-\\U0010FFFF]"  # matches nothing ("[]" would mean the empty string)
    parts = []
    for a, b in normalize_ranges(c.ranges):
        if a == b:
            parts.append(_escape_cp(a, _CLS_ESC))
        else:
            parts.append(_escape_cp(a, _CLS_ESC) + "-" + _escape_cp(b, _CLS_ESC))
    return "[" + ("^" if c.negated else "") + "".join(parts) + "]"


def _format_repeat(r: Repeat) -> str:
    inner = "()" if r.item == EMPTY else format_expr(r.item, atom=True)
    if (r.min, r.max) == (0, None):
        return inner + "*"
    if (r.min, r.max) == (1, None):
        return inner + "+"
    if (r.min, r.max) == (0, 1):
        return inner + "?"
    if r.max is None:
        return f"{inner}{{{r.min},}}"
    if r.min == r.max:
        return f"{inner}{{{r.min}}}"
    return f"{inner}{{{r.min},{r.max}}}"


def format_expr(e: Expr, atom: bool = False) -> str:
    """GBNF text for one expression; `atom` parenthesizes anything that is not one."""
    if isinstance(e, Literal):
        return format_literal(e.text)
    if isinstance(e, CharClass):
        return format_class(e)
    if isinstance(e, RuleRef):
        return e.name
    if isinstance(e, TokenRef):
        body = f"<[{e.token_id}]>" if e.token_id is not None else str(e.name)
        return ("!" if e.negated else "") + body
    if isinstance(e, Repeat):
        return _format_repeat(e)
    if isinstance(e, Seq):
        text = " ".join(format_expr(x, atom=isinstance(x, Alt)) for x in e.items)
        return f"({text})" if atom else text
    if isinstance(e, Alt):
        text = " | ".join(format_expr(x) for x in e.options)
        return f"({text})" if atom else text
    raise TypeError(f"not an expression: {e!r}")
