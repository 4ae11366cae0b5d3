"""Keys of additional properties when listed names must be excluded: JSON string texts
whose decoded value is none of the names (schema objects, objects.py), exactly."""

from __future__ import annotations

from typing import Any, Optional

from ministruct.grammar.ir import NOTHING, CharClass, Expr, Literal, Repeat, alt, seq
from ministruct.grammar.schema.context import SchemaContext
from ministruct.grammar.schema.formats import ANY_HEX, ANY_STRING, RAW_OK, SHORT_ESCAPES, STRING_UNIT, encode_chars

_HEXNZ = CharClass(((49, 57), (65, 70), (97, 102)))
# `\uXXXX` for any value >= 0x80 (lone surrogates included): never an ASCII character
NON_ASCII_ESCAPE = seq(
    Literal("\\u"),
    alt(
        seq(_HEXNZ, Repeat(ANY_HEX, 3, 3)),
        seq(Literal("0"), _HEXNZ, Repeat(ANY_HEX, 2, 2)),
        seq(Literal("00"), CharClass(((56, 57), (65, 70), (97, 102))), ANY_HEX),
    ),
)


def not_in_names(c: SchemaContext, names: list[str]) -> Expr:
    """JSON string texts whose decoded value is not one of the names (exact; at the
    positions still inside a name, only raw characters, short escapes and non-ASCII
    `\\uXXXX` escapes are written). A rule of its own, whose every way out of the names
    calls one rule for the rest of the string and its closing quote, last: the rest of
    a key is then one configuration wherever it left the names (a tail call keeps no
    frame of where it came from), not one per trie node. The ways out that do not depend
    on the trie node (a raw non-ASCII character, an escape) are rules shared by the nodes
    they fit, so their byte paths are built, and stepped, once."""
    if not names:
        return ANY_STRING
    made = getattr(c, "keys_made", None)  # the same names elsewhere in the schema: one rule
    key = tuple(sorted(set(names)))
    if made is not None and key in made:
        return made[key]
    trie: dict = {}
    for n in names:
        t = trie
        for ch in n:
            t = t.setdefault(ch, {})
        t[None] = True

    # the parts every name set of the schema shares (under keys that are no sorted names):
    # the rest of a key, and the ways out of a trie node, by its ending and its next characters
    parts: dict[tuple, Any] = made if made is not None else {}
    rest = parts.get((None, "rest"))
    if rest is None:
        rest = parts[(None, "rest")] = c.rule("key_rest", seq(Repeat(STRING_UNIT, 0, None), Literal('"')))

    def leave(kind: str, body: Expr) -> Expr:
        """One rule per distinct way out (its body, then the rest of the key)."""
        hit = parts.get((None, kind, body))
        if hit is None:
            hit = parts[(None, kind, body)] = c.rule(kind, seq(body, rest))
        return hit

    def ways_out(ends: bool, kids: tuple[str, ...]) -> tuple[Expr, ...]:
        """The ways out of the names at a trie node (not a name's next character)."""
        got = parts.get((None, "out", ends, kids))
        if got is not None:
            return got
        opts: list[Expr] = [] if ends else [Literal('"')]
        excluded = [(ord(k), ord(k)) for k in kids]
        ascii_other = _minus(_RAW_ASCII, excluded)
        if ascii_other is not None:
            opts.append(seq(ascii_other, rest))
        wide = _minus(_RAW_NON_ASCII, excluded)
        if wide is not None:
            opts.append(leave("key_wide", wide))
        escapes: list[Expr] = [Literal(e) for cp, e in SHORT_ESCAPES.items() if chr(cp) not in kids]
        if all(k < "\x80" for k in kids):
            escapes.append(NON_ASCII_ESCAPE)
        if escapes:
            opts.append(leave("key_escape", alt(*escapes)))
        parts[(None, "out", ends, kids)] = got = tuple(opts)
        return got

    def build(t: dict) -> Expr:
        kids = tuple(sorted(k for k in t if k is not None))
        opts = [*ways_out(None in t, kids), *(seq(encode_chars(Literal(k)), build(t[k])) for k in kids)]
        return alt(*opts) if opts else NOTHING

    got = c.rule("other_key", seq(Literal('"'), build(trie)))
    if made is not None:
        made[key] = got
    return got


def _minus(cls: CharClass, excluded: list[tuple[int, int]]) -> Optional[CharClass]:
    rs = cls.code_point_ranges()
    out = []
    for a, b in rs:
        cur = a
        for x, _ in sorted(excluded):
            if x < cur or x > b:
                continue
            if x > cur:
                out.append((cur, x - 1))
            cur = x + 1
        if cur <= b:
            out.append((cur, b))
    return CharClass(tuple(out)) if out else None


# a raw character of a key: ASCII ones may go on in the names, the others never do
_RAW_ASCII = CharClass(tuple((a, min(b, 0x7F)) for a, b in RAW_OK.code_point_ranges() if a <= 0x7F))
_RAW_NON_ASCII = CharClass(tuple((max(a, 0x80), b) for a, b in RAW_OK.code_point_ranges() if b >= 0x80))
