"""llguidance's `x-guidance` escape options of a `%json` block, applied to the grammar the
JSON Schema front end made for it.

The schema front end writes every escape JSON has (ministruct's default: `\\/`, `\\u0041`,
lone surrogates...). llguidance writes fewer, and its two options change which:

    json_allowed_escapes               the characters allowed after a backslash (default
                                       `"\\bfnrtu`; `u`: `\\uXXXX` of a control character)
    json_allow_general_unicode_escapes `\\uXXXX` of any character in strings the schema
                                       leaves free (surrogate pairs whole, never alone);
                                       `const`, `enum`, `pattern` and `format` strings keep
                                       the control-character ones only

Where a `%json` block names either option, its strings follow llguidance's model with them
(tests/grammar/lark/test_lark_suite.py runs llguidance's own cases). The free-string pieces
of the schema grammar are replaced whole; elsewhere each escape is kept or dropped by what
it writes.
"""

from __future__ import annotations

from dataclasses import replace
from itertools import product

from ministruct.grammar.ir import EMPTY, Alt, CharClass, Expr, Grammar, Literal, Repeat, Seq, alt_some, seq, seq_all
from ministruct.grammar.lark.gaps import NOTHING
from ministruct.grammar.schema.formats import ANY_STRING, COUNTED_CHAR, RAW_OK, STRING_UNIT, u_escape
from ministruct.grammar.schema.keys import NON_ASCII_ESCAPE

DEFAULT_ESCAPES = '"\\bfnrtu'
SHORT = {'"': '\\"', "\\": "\\\\", "/": "\\/", "b": "\\b", "f": "\\f", "n": "\\n", "r": "\\r", "t": "\\t"}
MAX_SPELLINGS = 4096  # hex spellings enumerated to tell a control character's \\u escape from others


def restrict_escapes(g: Grammar, letters: str, general: bool) -> Grammar:
    """The grammar of a `%json` block with llguidance's escapes: `letters` after a backslash,
    `\\u` of any character in free strings when `general`."""
    unit = _free_unit(letters, general)
    non_ascii = alt_some(u_escape(0x80, 0xD7FF), u_escape(0xE000, 0xFFFF), _pairs()) if general else NOTHING
    whole = {
        STRING_UNIT: unit,
        COUNTED_CHAR: unit,
        ANY_STRING: seq(Literal('"'), Repeat(unit, 0, None), Literal('"')),
        NON_ASCII_ESCAPE: non_ascii if "u" in letters else NOTHING,
    }
    memo: dict[int, Expr] = {}

    def fix(e: Expr) -> Expr:
        hit = whole.get(e)
        if hit is not None:
            return hit
        key = id(e)
        if key in memo:
            return memo[key]
        out: Expr = e
        if isinstance(e, Literal):
            out = e if _literal_ok(e.text, letters) else NOTHING
        elif isinstance(e, Seq):
            out = _fix_seq(e, letters, fix)
        elif isinstance(e, Alt):
            out = alt_some(*(fix(o) for o in e.options))
        elif isinstance(e, Repeat):
            item = fix(e.item)
            out = (EMPTY if e.min == 0 else NOTHING) if item == NOTHING else Repeat(item, e.min, e.max)
        memo[key] = out
        return out

    return replace(g, rules={n: fix(b) for n, b in g.rules.items()})


def _free_unit(letters: str, general: bool) -> Expr:
    """One character of a string the schema leaves free."""
    opts: list[Expr] = [RAW_OK]
    opts += [Literal(SHORT[c]) for c in letters if c in SHORT]
    if "u" in letters:
        if general:
            opts += [u_escape(0, 0xD7FF), u_escape(0xE000, 0xFFFF), _pairs()]
        else:
            opts.append(u_escape(0, 0x1F))
    return alt_some(*opts)


def _pairs() -> Expr:
    return seq(u_escape(0xD800, 0xDBFF), u_escape(0xDC00, 0xDFFF))


def _control(hex4: str) -> bool:
    return int(hex4, 16) < 0x20


def _literal_ok(text: str, letters: str) -> bool:
    """Every escape written whole in `text` is allowed (an unfinished one at its end is
    judged with what follows, by _fix_seq)."""
    i = text.find("\\")
    while i >= 0:
        if i + 1 >= len(text):
            return True  # (unfinished)
        c = text[i + 1]
        if c == "u":
            hex4 = text[i + 2 : i + 6]
            if len(hex4) < 4:
                return True  # (unfinished)
            if "u" not in letters or not _control(hex4):
                return False
            i = text.find("\\", i + 6)
        else:
            if c not in letters:
                return False
            i = text.find("\\", i + 2)
    return True


def _unfinished(text: str) -> str | None:
    """The escape still open at the end of `text` (`\\`, `\\u`, `\\u0`...), or None."""
    i, n = 0, len(text)
    while True:
        i = text.find("\\", i)
        if i < 0:
            return None
        if i + 1 >= n:
            return "\\"
        if text[i + 1] == "u":
            if n - i < 6:
                return text[i:]
            i += 6
        else:
            i += 2


def _spellings(items: tuple[Expr, ...], n: int) -> set[str] | None:
    """The strings of exactly n characters the items spell from their start (None: they
    do not end at a character n, or too many to list)."""
    out = {""}
    k = 0
    while True:
        if all(len(s) == n for s in out):
            return out
        if k >= len(items) or any(len(s) > n for s in out):
            return None
        nxt = _chars(items[k])
        if nxt is None or len(out) * len(nxt) > MAX_SPELLINGS:
            return None
        out = {a + b for a, b in product(out, nxt)}
        k += 1


def _chars(e: Expr) -> set[str] | None:
    if isinstance(e, Literal):
        return {e.text}
    if isinstance(e, CharClass) and not e.negated:
        cps = [cp for a, b in e.ranges for cp in range(a, b + 1)]
        return {chr(cp) for cp in cps} if len(cps) <= 64 else None
    if isinstance(e, Seq):
        return _spellings(e.items, _width(e))
    if isinstance(e, Alt):
        out: set[str] = set()
        for o in e.options:
            x = _chars(o)
            if x is None:
                return None
            out |= x
        return out
    if isinstance(e, Repeat) and e.min == e.max and e.max is not None:
        x = _chars(e.item)
        if x is None or len(x) ** e.min > MAX_SPELLINGS:
            return None
        return {"".join(t) for t in product(sorted(x), repeat=e.min)}
    return None


def _width(e: Expr) -> int:
    if isinstance(e, Literal):
        return len(e.text)
    if isinstance(e, CharClass):
        return 1
    if isinstance(e, Seq):
        return sum(_width(x) for x in e.items)
    if isinstance(e, Alt):
        return _width(e.options[0])
    if isinstance(e, Repeat):
        return _width(e.item) * e.min
    return -1


def _fix_seq(e: Seq, letters: str, fix) -> Expr:
    """A sequence with its escapes judged: one left open at the end of a literal is read
    through the items after it (the hex digits of a `\\uXXXX`)."""
    items = list(e.items)
    for k, x in enumerate(items):
        if isinstance(x, Literal) and "\\" in x.text:
            tail = _unfinished(x.text)
            if tail is None:
                continue
            need = 6 - len(tail) if tail != "\\" else 1
            spelled = _spellings(tuple(items[k + 1 :]), need)
            # (too many spellings to list: not a control character's; the front end never
            # writes one escape that is allowed in some spellings and not in others)
            if spelled is None or not any(_literal_ok(tail + s, letters) for s in spelled):
                return NOTHING
    return seq_all(*(fix(x) for x in items))
