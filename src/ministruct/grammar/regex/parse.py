"""Python `re` patterns -> Grammar IR, with exactly `re.fullmatch`'s language on str.

`re.compile` is the validity oracle (a pattern is valid iff `re` accepts it); a
scanner mirroring `re._parser`'s lexing feeds a Lark LALR parser (regex.lark).
Character sets (`\\d \\w \\s`, case-insensitive matching) come from classes.py, which
asks `re` itself, so they agree with it code point for code point. What no finite
automaton can do (backreferences, lookaround, conditionals) and what depends on
backtracking order (atomic groups, possessive quantifiers) is a
GrammarSyntaxError naming the construct and its column.
"""

from __future__ import annotations

import re
import unicodedata
import warnings
from bisect import bisect_left
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path
from typing import Any

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedInput, VisitError
from lark.lexer import Lexer

from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.ir import (
    CharClass,
    Expr,
    Grammar,
    Literal,
    Repeat,
    alt,
    gc_paused,
    normalize_ranges,
    seq,
)
from ministruct.grammar.parser_cache import lalr_parser
from ministruct.grammar.regex.anchors import Assert, eliminate_assertions, has_assertions
from ministruct.grammar.regex.classes import category_ranges, ignorecase_ranges, re_escape_cp
from ministruct.grammar.regex.printer import grammar_to_regex

__all__ = ["parse_regex", "grammar_to_regex"]

# inline flag bits tracked by the scanner
F_I, F_M, F_S, F_X, F_A = 1, 2, 4, 8, 16
_FLAG_BITS = {"i": F_I, "m": F_M, "s": F_S, "x": F_X, "a": F_A, "u": 0, "L": 0}
_WHITESPACE = " \t\n\r\v\f"
_SIMPLE_ESCAPES = {"a": 7, "f": 12, "n": 10, "r": 13, "t": 9, "v": 11, "\\": 92}
_OCT = "01234567"
_DIG = "0123456789"
_HEX = "0123456789abcdefABCDEF"
_POSSESSIVE_HINT = "its language depends on backtracking order"


# ---------------------------------------------------------------- scanner


class _Tok(Token):
    """A Lark token with the decoded payload the scanner attached."""

    payload: Any = None


@lru_cache(maxsize=4)
def _newlines(pattern: str) -> list[int]:
    return [i for i, c in enumerate(pattern) if c == "\n"]


def _line_col(pattern: str, pos: int) -> tuple[int, int]:
    """1-based line and column of character `pos` (verbose patterns span lines)."""
    newlines = _newlines(pattern)
    before = bisect_left(newlines, pos)  # newlines before pos
    return before + 1, pos - (newlines[before - 1] + 1 if before else 0) + 1


def _tok(kind: str, text: str, pos: int, pattern: str, payload: Any = None) -> _Tok:
    line, col = _line_col(pattern, pos)
    t = _Tok(kind, text, start_pos=pos, line=line, column=col, end_pos=pos + len(text))
    t.payload = payload
    return t


class _Unsupported(Exception):
    def __init__(self, pos: int, what: str, why: str = "cannot be enforced by a token mask") -> None:
        super().__init__(what)
        self.pos, self.what, self.why = pos, what, why


class _Scanner:
    """Tokens of a pattern `re.compile` accepted, lexed the way `re._parser` lexes it."""

    def __init__(self, pattern: str) -> None:
        self.p = pattern
        self.i = 0
        self.flags = [0]  # flags in force, one entry per open group
        self.out: list[_Tok] = []

    def emit(self, kind: str, start: int, payload: Any = None) -> None:
        self.out.append(_tok(kind, self.p[start : self.i], start, self.p, payload))

    def peek(self, k: int = 0) -> str:
        j = self.i + k
        return self.p[j] if j < len(self.p) else ""

    def run(self) -> list[_Tok]:
        p = self.p
        while self.i < len(p):
            c = p[self.i]
            fl = self.flags[-1]
            if fl & F_X and c in _WHITESPACE:
                self.i += 1
                continue
            if fl & F_X and c == "#":
                nl = p.find("\n", self.i)
                self.i = len(p) if nl < 0 else nl + 1
                continue
            start = self.i
            if c == "\\":
                self.escape()
            elif c == "[":
                self.char_class()
            elif c == "(":
                self.group()
            elif c == ")":
                self.i += 1
                self.flags.pop()
                self.emit("RPAR", start)
            elif c == "|":
                self.i += 1
                self.emit("BAR", start)
            elif c == ".":
                self.i += 1
                self.emit("DOT", start, fl)
            elif c in "^$":
                self.i += 1
                kind = ("bol" if c == "^" else "eol") if fl & F_M else ("start" if c == "^" else "end")
                self.emit("ANCHOR", start, (kind, c))
            elif c in "*+?{":
                self.quantifier(c)
            else:
                self.i += 1
                self.emit("CHAR", start, (ord(c), fl))
        return self.out

    # -- quantifiers
    def quantifier(self, c: str) -> None:
        p, start = self.p, self.i
        self.i += 1
        if c == "{":
            j = self.i
            if self.peek() == "}":
                self.emit("CHAR", start, (ord("{"), self.flags[-1]))
                return
            lo = hi = ""
            while self.peek() and self.peek() in _DIG:
                lo += self.peek()
                self.i += 1
            if self.peek() == ",":
                self.i += 1
                while self.peek() and self.peek() in _DIG:
                    hi += self.peek()
                    self.i += 1
            else:
                hi = lo
            if self.peek() != "}":
                self.i = j
                self.emit("CHAR", start, (ord("{"), self.flags[-1]))
                return
            self.i += 1
            bounds = (int(lo) if lo else 0, int(hi) if hi else None)
        else:
            bounds = {"*": (0, None), "+": (1, None), "?": (0, 1)}[c]
        if self.peek() == "?":
            self.i += 1
        elif self.peek() == "+":
            self.i += 1
            q = p[start : self.i]
            raise _Unsupported(
                start, f"possessive quantifier {q}", f"is not supported ({_POSSESSIVE_HINT}); use {q[:-1]}"
            )
        self.emit("QUANT", start, bounds)

    # -- escapes outside classes
    def escape(self) -> None:
        p, start = self.p, self.i
        e = p[self.i + 1]
        self.i += 2
        fl = self.flags[-1]
        if e in "AZ":
            self.emit("ANCHOR", start, (e, "\\" + e))
        elif e in "bB":
            name = "word boundary" if e == "b" else "non-boundary"
            raise _Unsupported(
                start, f"{name} \\{e}", "is not supported (a zero-width test of the neighbouring characters)"
            )
        elif e in "dDsSwW":
            self.emit("CATEGORY", start, (e, fl))
        elif e in _DIG and e != "0":
            if self.peek() in _DIG and self.peek():
                if e in _OCT and self.peek() in _OCT and self.peek(1) and self.peek(1) in _OCT:
                    self.i += 2
                    self.emit("CHAR", start, (int(p[start + 1 : self.i], 8), fl))
                    return
                self.i += 1
            raise _Unsupported(start, f"backreference {p[start : self.i]}")
        else:
            self.emit("CHAR", start, (self.escape_code(e), fl))

    def escape_code(self, e: str) -> int:
        """The code point of a character escape whose letter `e` was just consumed."""
        p = self.p
        if e in _SIMPLE_ESCAPES:
            return _SIMPLE_ESCAPES[e]
        width = {"x": 2, "u": 4, "U": 8}.get(e)
        if width:
            self.i += width
            return int(p[self.i - width : self.i], 16)
        if e == "N":
            end = p.index("}", self.i)
            name = p[self.i + 1 : end]
            self.i = end + 1
            return ord(unicodedata.lookup(name))
        if e in _OCT:  # \0 outside classes, any octal digit inside them
            j = self.i
            while self.i < len(p) and self.i - j < 2 and p[self.i] in _OCT:
                self.i += 1
            return int(p[j - 1 : self.i], 8)
        return ord(e)

    # -- groups and inline flags
    def group(self) -> None:
        p, start = self.p, self.i
        fl = self.flags[-1]
        if self.peek(1) != "?":
            self.i += 1
            self.flags.append(fl)
            self.emit("GROUP_OPEN", start)
            return
        self.i += 2
        c = self.peek()
        if c == ":":
            self.i += 1
            self.flags.append(fl)
            self.emit("GROUP_OPEN", start)
        elif c == "P" and self.peek(1) == "<":
            self.i = p.index(">", self.i) + 1
            self.flags.append(fl)
            self.emit("GROUP_OPEN", start)
        elif c == "P":
            end = p.index(")", self.i)
            raise _Unsupported(start, f"named backreference {p[start : end + 1]}")
        elif c == "#":
            self.i = p.index(")", self.i) + 1
        elif c in "=!":
            raise _Unsupported(start, f"{'negative ' if c == '!' else ''}lookahead (?{c}...)")
        elif c == "<":
            neg = self.peek(1) == "!"
            raise _Unsupported(start, f"{'negative ' if neg else ''}lookbehind (?<{self.peek(1)}...)")
        elif c == "(":
            end = p.index(")", self.i)
            raise _Unsupported(start, f"conditional group {p[start : end + 1]}...)")
        elif c == ">":
            raise _Unsupported(start, "atomic group (?>...)", f"is not supported ({_POSSESSIVE_HINT}); use (?:...)")
        else:
            on = off = 0
            while self.peek() in _FLAG_BITS:
                on |= _FLAG_BITS[self.peek()]
                self.i += 1
            if self.peek() == "-":
                self.i += 1
                while self.peek() in _FLAG_BITS:
                    off |= _FLAG_BITS[self.peek()]
                    self.i += 1
            closer = self.peek()
            self.i += 1
            if closer == ")":  # global flags: re only allows them at the start
                self.flags[0] |= on
                self.flags[-1] |= on
            else:
                self.flags.append((fl | on) & ~off)
                self.emit("GROUP_OPEN", start)

    # -- character classes
    def char_class(self) -> None:
        p, start = self.p, self.i
        self.i += 1
        negate = self.peek() == "^"
        if negate:
            self.i += 1
        self.emit("CLASS_OPEN", start, negate)
        first = True
        while True:
            if self.peek() == "]" and not first:
                s = self.i
                self.i += 1
                self.emit("CLASS_CLOSE", s, (p[start : self.i], self.flags[-1]))
                return
            first = False
            self.class_atom()
            if self.peek() == "-":
                if self.peek(1) == "]":
                    s = self.i
                    self.i += 1
                    self.emit("CLASS_CHAR", s, ord("-"))
                else:
                    s = self.i
                    self.i += 1
                    self.emit("CLASS_DASH", s)
                    self.class_atom()

    def class_atom(self) -> None:
        start = self.i
        c = self.p[self.i]
        self.i += 1
        if c != "\\":
            self.emit("CLASS_CHAR", start, ord(c))
            return
        e = self.p[self.i]
        self.i += 1
        if e in "dDsSwW":
            self.emit("CLASS_CATEGORY", start, e)
        elif e == "b":
            self.emit("CLASS_CHAR", start, 8)
        else:
            self.emit("CLASS_CHAR", start, self.escape_code(e))


class _TokenList(Lexer):
    """Lark 'lexer' that hands over the scanner's tokens."""

    def __init__(self, lexer_conf: Any) -> None:
        pass

    def lex(self, data: Any) -> Any:  # type: ignore[override]
        return iter(data)


@lru_cache(maxsize=1)
def _parser() -> Lark:
    text = (Path(__file__).parent / "regex.lark").read_text(encoding="utf-8")
    return lalr_parser(text, lexer=_TokenList, maybe_placeholders=False)


# ---------------------------------------------------------------- tree -> IR


@dataclass(frozen=True)
class _ClassItem:
    re_text: str
    ranges: tuple[tuple[int, int], ...]


def _item_text(cp: int) -> str:
    return re_escape_cp(cp)


class _ToIR(Transformer):
    def start(self, c):
        return c[0]

    def alternation(self, c):
        return alt(*[x for x in c if not isinstance(x, Token)])

    def sequence(self, c):
        return seq(*c)

    def item(self, c):
        if len(c) == 1:
            return c[0]
        lo, hi = c[1].payload
        if hi == 0:
            return Literal("")
        if (lo, hi) == (1, 1):
            return c[0]
        return Repeat(c[0], lo, hi)

    def char(self, c):
        cp, fl = c[0].payload
        if fl & F_I:
            rs = ignorecase_ranges(re_escape_cp(cp), ((cp, cp),), bool(fl & F_A))
            if rs != ((cp, cp),):
                return CharClass(rs)
        return Literal(chr(cp))

    def category(self, c):
        letter, fl = c[0].payload
        return CharClass(category_ranges(letter, bool(fl & F_A)))

    def dot(self, c):
        return CharClass((), negated=True) if c[0].payload & F_S else CharClass(((10, 10),), negated=True)

    def anchor(self, c):
        kind, text = c[0].payload
        return Assert(kind, text, c[0].column, c[0].line)

    def group(self, c):
        return c[1]

    def class_single(self, c):
        return c[0]

    def class_range(self, c):
        lo, hi = c[0].ranges[0][0], c[2].ranges[0][0]
        return _ClassItem(f"{c[0].re_text}-{c[2].re_text}", ((lo, hi),))

    def class_atom(self, c):
        t = c[0]
        if t.type == "CLASS_CATEGORY":
            return _ClassItem("\\" + t.payload, category_ranges(t.payload, False))
        return _ClassItem(_item_text(t.payload), ((t.payload, t.payload),))

    def char_class(self, c):
        negate = c[0].payload
        _, fl = c[-1].payload
        items: list[_ClassItem] = []
        for it in c[1:-1]:
            if it.re_text.startswith("\\") and it.re_text[1:] in ("d", "D", "s", "S", "w", "W"):
                it = _ClassItem(it.re_text, category_ranges(it.re_text[1], bool(fl & F_A)))
            items.append(it)
        plain = normalize_ranges([r for it in items for r in it.ranges])
        if fl & F_I:
            body = "".join(it.re_text for it in items)
            cls = ("[^" if negate else "[") + body + "]"
            positive = CharClass(plain, negated=negate).code_point_ranges()
            return CharClass(ignorecase_ranges(cls, positive, bool(fl & F_A)))
        return CharClass(plain, negated=negate)


# ---------------------------------------------------------------- entry point

_EXPECTED = [
    ("missing ), unterminated subpattern", ("')'",)),
    ("missing ), unterminated comment", ("')'",)),
    ("unbalanced parenthesis", ("an item", "'|'", "end of pattern")),
    ("nothing to repeat", ("a character, class, group or escape before the quantifier",)),
    ("multiple repeat", ("an item before the quantifier (wrap a repeated item in (?:...) to repeat it again)",)),
    ("min repeat greater than max repeat", ("{m,n} with m <= n",)),
    ("bad character range", ("a range lo-hi with lo <= hi, both single characters",)),
    ("unterminated character set", ("']'",)),
    ("bad escape", ("a known escape (\\n \\t \\d \\w \\s \\xHH \\uHHHH ...) or an escaped punctuation mark",)),
    ("incomplete escape \\x", ("2 hex digits",)),
    ("incomplete escape \\u", ("4 hex digits",)),
    ("incomplete escape \\U", ("8 hex digits",)),
    ("invalid group reference", ("the number of a group that is already closed",)),
    ("unknown extension", ("(?:", "(?P<name>", "(?P=name)", "(?#", "(?=", "(?!", "(?<=", "(?<!", "(?flags)")),
    ("global flags not at the start", ("flags (?aiLmsux) only at the very start",)),
    ("missing -, : or )", ("'-'", "':'", "')'")),
    ("missing :", ("':'",)),
    ("missing flag", ("a flag letter (i, m, s, x, a, u)",)),
    ("unexpected end of pattern", ("more pattern text",)),
    ("bad character in group name", ("a Python identifier as the group name",)),
    ("redefinition of group name", ("a group name not used before",)),
    ("missing group name", ("a group name",)),
    ("undefined character name", ("a Unicode character name (\\N{LATIN SMALL LETTER A})",)),
    ("octal escape value", ("an octal escape up to \\377",)),
    ("bad inline flags", ("flags that are not both turned on and off",)),
]


def _invalid(pattern: str, err: re.error, source: str) -> GrammarSyntaxError:
    msg = err.msg
    expected: tuple[str, ...] = ("a valid Python regular expression",)
    for prefix, exp in _EXPECTED:
        if msg.startswith(prefix):
            expected = exp
            break
    col = err.colno if err.colno is not None else 1
    return GrammarSyntaxError(
        f"invalid regex: {msg} at column {col}",
        source=source,
        text=pattern,
        line=err.lineno,
        column=col,
        expected=expected,
    )


def parse_regex(pattern: str, *, source: str = "<regex>") -> Grammar:
    """A Grammar whose language is exactly {s : re.fullmatch(pattern, s)}; rule `root`."""
    if not isinstance(pattern, str):
        raise GrammarSyntaxError("a regex must be text (str)", source=source)
    notes: list[str] = []
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        try:
            re.compile(pattern)
        except re.error as e:
            raise _invalid(pattern, e, source) from None
        except (OverflowError, RecursionError) as e:
            raise GrammarSyntaxError(f"regex too large for Python's re: {e}", source=source, text=pattern) from None
    notes.extend(f"{source}: {w.message}" for w in caught)
    try:
        return _build(pattern, source, notes)
    except RecursionError:
        raise GrammarSyntaxError("regex nested too deeply", source=source, text=pattern) from None


def _build(pattern: str, source: str, notes: list[str]) -> Grammar:
    try:
        tokens = _Scanner(pattern).run()
    except _Unsupported as u:
        line, col = _line_col(pattern, u.pos)
        raise GrammarSyntaxError(
            f"{u.what} at column {col} {u.why}", source=source, text=pattern, line=line, column=col
        ) from None
    try:
        with gc_paused():
            tree = _parser().parse(tokens)
            expr: Expr = _ToIR().transform(tree)
    except UnexpectedInput as e:  # the scanner and re disagree: report, never crash
        raise GrammarSyntaxError(
            f"regex structure not understood at column {getattr(e, 'column', '?')}",
            source=source,
            text=pattern,
            line=getattr(e, "line", None),
            column=getattr(e, "column", None),
        ) from None
    except VisitError as e:
        raise e.orig_exc from None
    if has_assertions(expr):
        expr = eliminate_assertions(expr, source=source, text=pattern)
    return Grammar({"root": expr}, root="root", source=source, warnings=notes)
