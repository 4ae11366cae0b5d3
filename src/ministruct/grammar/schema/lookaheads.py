"""Lookaheads at the start of an anchored `pattern`, as patterns of their own.

A pattern `^(?=A)(?!B)R` (Python `re.search`, as the validator reads it) matches a string
exactly when `^(?:A)` matches it, `^(?:B)` does not, and `^R` does: a lookahead at the
start of the string looks at the string from its start. So such a pattern is the
pattern `^R` together with the pattern `^(?:A)` and not the pattern `^(?:B)`, which the
compiler enforces as it does several patterns and `not: {pattern}` (one DFA of them all),
exact. Only lookaheads right after a leading `^` are read so (not under the MULTILINE
flag, where `^` also matches after a newline; not where an alternative `|` at the top
level would leave them outside); any other lookaround stays refused by the regex front
end, by pointer.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Iterator, Optional

from ministruct.grammar.schema.merge import PATTERNS
from ministruct.grammar.schema.patterns import GLOBAL_FLAGS


@dataclass(frozen=True)
class Lookaheads:
    """A pattern read as `rest` (anchored), with patterns that must match (`required`) and
    patterns that must not (`forbidden`), each anchored at the start."""

    rest: str
    required: tuple[str, ...]
    forbidden: tuple[str, ...]


def split_lookaheads(pattern: str) -> Optional[Lookaheads]:
    """The lookaheads right after a leading `^` of `pattern` as patterns of their own, or
    None when it has none there (or they cannot be read apart exactly)."""
    if not isinstance(pattern, str) or "(?" not in pattern:
        return None
    flags = GLOBAL_FLAGS.match(pattern).group(0)  # type: ignore[union-attr]
    if "m" in flags or "x" in flags or "(?m" in pattern[len(flags) :]:
        return None  # (`^` after newlines; verbose patterns read spaces otherwise)
    i = len(flags)
    if pattern[i : i + 1] != "^":
        return None
    i += 1
    required: list[str] = []
    forbidden: list[str] = []
    while pattern.startswith(("(?=", "(?!"), i):
        end = _group_end(pattern, i)
        if end is None or pattern[end + 1 : end + 2] in ("*", "+", "?", "{"):
            return None
        (required if pattern[i + 2] == "=" else forbidden).append(f"{flags}^(?:{pattern[i + 3 : end]})")
        i = end + 1
    rest = pattern[i:]
    if not (required or forbidden) or top_level_bar(rest) or "(?=" in rest or "(?!" in rest:
        return None  # (a lookahead left in the rest: the front end refuses the pattern as written)
    return Lookaheads(f"{flags}^{rest}", tuple(required), tuple(forbidden))


def trailing_found(pattern: str) -> str:
    """`pattern` with a positive lookahead that ends it at the top level, `R(?=X)`, read as
    `R(?:X)`: re.search finds a match of one where it finds one of the other (what follows
    a match is no part of it). Any other pattern as it is."""
    if not pattern.endswith(")") or "(?=" not in pattern or top_level_bar(pattern):
        return pattern
    opens = [i for i, c, depth in _outside_classes(pattern) if c == "(" and depth == 1]
    if not opens or not pattern.startswith("(?=", opens[-1]) or _group_end(pattern, opens[-1]) != len(pattern) - 1:
        return pattern
    out = f"{pattern[: opens[-1]]}(?:{pattern[opens[-1] + 3 :]}"
    return pattern if any(x in out for x in ("(?=", "(?!", "(?<=", "(?<!")) else out


def _outside_classes(text: str, start: int = 0) -> Iterator[tuple[int, str, int]]:
    """(index, character, group depth after it) of each character of `text` from `start`
    that is neither escaped nor inside a character class."""
    depth, i, in_class = 0, start, False
    while i < len(text):
        c = text[i]
        if c == "\\":
            i += 2
            continue
        if in_class:
            in_class = c != "]"
        elif c == "[":
            in_class = True
            if text[i + 1 : i + 2] == "^":
                i += 1
            if text[i + 1 : i + 2] == "]":  # (a `]` first in a class is a character)
                i += 1
        else:
            depth += (c == "(") - (c == ")")
            yield i, c, depth
        i += 1


def _group_end(text: str, start: int) -> Optional[int]:
    """The index of the `)` closing the group opened at `start` (None when unbalanced)."""
    return next((i for i, c, depth in _outside_classes(text, start) if c == ")" and depth == 0), None)


def top_level_bar(text: str) -> bool:
    """Does `text` have an alternative `|` outside every group and class?"""
    return any(c == "|" and depth == 0 for _, c, depth in _outside_classes(text))


def read_lookaheads(node: dict) -> bool:
    """Lookaheads after a leading `^` of the node's patterns as patterns of their own
    (schema/lookaheads.py): those required joined to the patterns, those forbidden to a
    native `not`. True when it changed the node."""
    required: list[str] = []
    forbidden: list[str] = []

    def read(p: Any) -> Any:
        split = split_lookaheads(p)
        if split is None:
            return p
        required.extend(split.required)
        forbidden.extend(split.forbidden)
        return split.rest

    if isinstance(node.get("pattern"), str):
        node["pattern"] = read(node["pattern"])
    if isinstance(node.get(PATTERNS), list):
        node[PATTERNS] = [read(p) for p in node[PATTERNS]]
    if not (required or forbidden):
        return False
    if required:
        node[PATTERNS] = [*node.get(PATTERNS, []), *required]
    if forbidden:
        avoid = [{"type": "string", "pattern": p} for p in forbidden]
        if "not" in node:
            avoid.insert(0, node["not"])
        node["not"] = avoid[0] if len(avoid) == 1 else {"anyOf": avoid}
    return True


def failing_pattern(p: Any) -> list[dict]:
    """Schemas (for strings) whose union is the strings pattern `p` does not match: with
    lookaheads read apart, failing the rest, a required lookahead or hitting a forbidden one."""
    split = split_lookaheads(p)
    if split is None:
        return [{"not": {"pattern": p}}]
    return [
        {"not": {"pattern": split.rest}},
        *({"not": {"pattern": a}} for a in split.required),
        *({"pattern": b} for b in split.forbidden),
    ]
