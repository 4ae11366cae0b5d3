"""GBNF (llama.cpp's dialect) -> Grammar IR.

Lark builds the LALR(1) table of gbnf.lark; gbnf_lexer's lexer and driver run it over
the text, and the callbacks here build the IR at each reduction;
analysis.check_grammar validates the result. Semantics follow
llama.cpp's src/llama-grammar.cpp: names are `[a-zA-Z0-9-]+`, a rule ends at the
end of its line unless inside parentheses or right after `::=` or `|`, `""` and
`[]` match the empty string, quantifiers stack (`"a"*?`), a rule defined twice
keeps its last definition, `{,n}` is an error, and a repetition minimum above
2000 is an error.
"""

from __future__ import annotations

import re
import threading
from functools import lru_cache
from pathlib import Path

from lark import Lark, Token, Transformer
from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.analysis import check_grammar
from ministruct.grammar.gbnf.lexer import GbnfLexer, LalrDriver, ParenDepthError
from ministruct.grammar.ir import (
    EMPTY,
    MAX_CODE_POINT,
    CharClass,
    Expr,
    Grammar,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    TokenRef,
    alt,
    gc_paused,
    normalize_ranges,
)
from ministruct.grammar.parser_cache import lalr_parser

MAX_REPETITION = 2000  # llama.cpp's MAX_REPETITION_THRESHOLD
MAX_EXPR_DEPTH = 400
MAX_TOKEN_ID = 2**31 - 1

_SIMPLE_ESCAPES = {"t": 9, "n": 10, "r": 13, "\\": 92, '"': 34, "[": 91, "]": 93, "-": 45}
_ESCAPE = re.compile(r"\\(?:x([0-9a-fA-F]{2})|u([0-9a-fA-F]{4})|U([0-9a-fA-F]{8})|(.))", re.S)


# ---------------------------------------------------------------- lexing helpers


class _SyntaxProblem(Exception):
    """Raised inside the parse; turned into a GrammarSyntaxError with source and text."""

    def __init__(self, reason: str, line: int, column: int, expected: tuple[str, ...] = ()) -> None:
        super().__init__(reason)
        self.reason, self.line, self.column, self.expected = reason, line, column, expected


def _error(reason: str, line: int, column: int) -> _SyntaxProblem:
    return _SyntaxProblem(reason, line, column)


def _offset_pos(tok: Token, offset: int) -> tuple[int, int]:
    """Line and column of character `offset` inside a token (tokens may span lines)."""
    before = tok.value[:offset]
    nl = before.count("\n")
    if not nl:
        return tok.line, tok.column + offset
    return tok.line + nl, offset - before.rfind("\n")


def _escape_value(m: re.Match, tok: Token, start: int) -> int:
    hx = m.group(1) or m.group(2) or m.group(3)
    if hx is not None:
        cp = int(hx, 16)
        if cp > MAX_CODE_POINT:
            line, col = _offset_pos(tok, start + m.start())
            raise _error(f"code point {m.group(0)} is beyond U+10FFFF", line, col)
        return cp
    return _SIMPLE_ESCAPES[m.group(4)]  # the lexer admits only known escapes


def _decode_literal(tok: Token) -> str:
    body = tok.value[1:-1]
    if "\\" not in body:
        return body
    return _ESCAPE.sub(lambda m: chr(_escape_value(m, tok, 1)), body)


def _decode_class(tok: Token, warnings: list[tuple[int | None, str]]) -> tuple[tuple[tuple[int, int], ...], bool]:
    """Ranges and negation of `[...]`, read exactly as llama.cpp's parser reads them."""
    text = tok.value
    negated = text.startswith("[^")
    i = 2 if negated else 1
    n = len(text) - 1  # index of the closing ']'
    ranges: list[tuple[int, int]] = []

    def char_at(j: int) -> tuple[int, int]:
        if text[j] == "\\":
            m = _ESCAPE.match(text, j)
            assert m is not None
            return _escape_value(m, tok, 0), m.end()
        return ord(text[j]), j + 1

    while i < n:
        lo, i = char_at(i)
        if text[i] == "-" and i + 1 < n:
            hi, i = char_at(i + 1)
            if hi < lo:
                line, _ = _offset_pos(tok, i)
                warnings.append(
                    (line, f"range {chr(lo)!r}-{chr(hi)!r} in {text} is empty (its end is before its start)")
                )
            ranges.append((lo, hi))
        else:
            ranges.append((lo, lo))
    return normalize_ranges(ranges), negated


def _sequence(items: list) -> Expr:
    """The IR of a sequence already flattened by seq_add."""
    if not items:
        return EMPTY
    return items[0] if len(items) == 1 else Seq(tuple(items))


class _Empty:
    """An empty `""` or `[]`: matches the empty string but cannot take a quantifier."""

    __slots__ = ("tok",)

    def __init__(self, tok: Token) -> None:
        self.tok = tok


def _depth(e: Expr) -> int:
    """Nesting depth of an expression (iterative: safe on any input)."""
    best = 0
    stack = [(e, 1)]
    while stack:
        x, d = stack.pop()
        best = max(best, d)
        kids = getattr(x, "items", None) or getattr(x, "options", None)
        if kids:
            stack.extend((k, d + 1) for k in kids)
        elif isinstance(x, Repeat):
            stack.append((x.item, d + 1))
    return best


# ---------------------------------------------------------------- IR construction


class _Builder(Transformer):
    """Lark LALR callbacks: each reduction of gbnf.lark builds IR directly (no parse tree)."""

    def __init__(self) -> None:
        self.lexer: "GbnfLexer | None" = None
        self.reset()

    def reset(self) -> None:
        """Forget the previous parse (its warnings and interned IR)."""
        self.warnings: list[tuple[int | None, str]] = []  # (line, message); placed in _parse
        self._classes: dict[str, CharClass] = {}  # class text -> IR (big grammars repeat classes)
        self._refs: dict[str, RuleRef] = {}
        self._used: dict[str, None] = {}  # rules referenced by the rule being read, in order
        self.references: dict[str, list[str]] = {}  # per rule, as analysis.check_grammar wants

    # items
    def literal(self, c: list) -> object:
        text = _decode_literal(c[0])
        return Literal(text) if text else _Empty(c[0])

    def char_class(self, c: list) -> object:
        tok = c[0]
        if tok.value in ("[]", "[^]"):
            self.warnings.append((tok.line, f"{tok.value} matches the empty string (as in llama.cpp)"))
            return _Empty(tok)
        hit = self._classes.get(tok.value)
        if hit is not None:
            return hit
        n_warnings = len(self.warnings)
        ranges, negated = _decode_class(tok, self.warnings)
        cls = CharClass(ranges, negated)
        if not cls.code_point_ranges():
            cls = CharClass(())  # one canonical form for a class that matches no character
        if len(self.warnings) == n_warnings:  # cache only what re-decoding would not warn about
            self._classes[tok.value] = cls
        return cls

    def rule_ref(self, c: list) -> Expr:
        name = c[0].value
        self._used[name] = None
        ref = self._refs.get(name)
        if ref is None:
            ref = self._refs[name] = RuleRef(name)
        return ref

    def token_id(self, c: list) -> Expr:
        tok = c[0]
        negated = tok.value.startswith("!")
        digits = tok.value[2 + negated : -2]
        if len(digits) > 10 or int(digits) > MAX_TOKEN_ID:
            raise _error(f"token id {digits} is out of range (at most {MAX_TOKEN_ID})", tok.line, tok.column)
        return TokenRef(token_id=int(digits), negated=negated)

    def token_text(self, c: list) -> Expr:
        tok = c[0]
        negated = tok.value.startswith("!")
        return TokenRef(name=tok.value[1:] if negated else tok.value, negated=negated)

    def any_char(self, c: list) -> Expr:
        return _ANY

    def group(self, c: list) -> Expr:
        return alt(*c[1])

    # quantifiers (they stack: "a"*? is ("a"*)?)
    def _repeat(self, item: object, lo: int, hi: "int | None", tok: Token) -> Expr:
        if isinstance(item, _Empty):
            what = "string literal" if item.tok.value.startswith('"') else "character class"
            raise _error(f"'{tok.value}' has nothing to repeat: the {what} before it is empty", tok.line, tok.column)
        return item if item is EMPTY else Repeat(item, lo, hi)  # type: ignore[arg-type]

    def star(self, c: list) -> Expr:
        return self._repeat(c[0], 0, None, c[1])

    def plus(self, c: list) -> Expr:
        return self._repeat(c[0], 1, None, c[1])

    def optional(self, c: list) -> Expr:
        return self._repeat(c[0], 0, 1, c[1])

    def _count(self, tok: Token) -> int:
        if len(tok.value) > 9 or int(tok.value) > MAX_REPETITION:
            raise _error(
                f"repetition count {tok.value[:12]} exceeds llama.cpp's limit of {MAX_REPETITION}",
                tok.line,
                tok.column,
            )
        return int(tok.value)

    def rep_exact(self, c: list) -> Expr:
        n = self._count(c[2])
        return self._repeat(c[0], n, n, c[1])

    def rep_min(self, c: list) -> Expr:
        return self._repeat(c[0], self._count(c[2]), None, c[1])

    def rep_range(self, c: list) -> Expr:
        brace, hi_tok = c[1], c[4]
        lo = self._count(c[2])
        if len(hi_tok.value) > 9:
            raise _error(f"repetition maximum {hi_tok.value[:12]} is too large", hi_tok.line, hi_tok.column)
        hi = int(hi_tok.value)
        if hi < lo:
            raise _error(f"repetition {{{lo},{hi}}} has its maximum below its minimum", brace.line, brace.column)
        if hi > MAX_REPETITION:
            self.warnings.append(
                (
                    brace.line,
                    f"{{{lo},{hi}}}: llama.cpp reads a maximum above {MAX_REPETITION} as unbounded; "
                    "ministruct keeps the exact bound",
                )
            )
        return self._repeat(c[0], lo, hi, brace)

    # sequences and alternatives: plain lists until the rule or group is complete
    def seq_first(self, c: list) -> list:
        return self.seq_add([[], c[0]])

    def seq_add(self, c: list) -> list:
        items, x = c
        t = type(x)
        if t is Literal:
            if not x.text:  # an empty group, `()`
                pass
            elif items and type(items[-1]) is Literal:  # adjacent literals merge
                items[-1] = Literal(items[-1].text + x.text)
            else:
                items.append(x)
        elif t is Seq:
            for y in x.items:
                self.seq_add([items, y])
        elif t is not _Empty:
            items.append(x)
        return items

    def alts_first(self, c: list) -> list:
        return [_sequence(c[0])]

    def alts_empty(self, c: list) -> list:
        return [EMPTY]

    def alts_add(self, c: list) -> list:
        c[0].append(_sequence(c[2]))
        return c[0]

    def alts_add_empty(self, c: list) -> list:
        c[0].append(EMPTY)
        return c[0]

    def rule(self, c: list) -> tuple:
        name, expr = c[0], alt(*c[2])
        # IR depth <= 2 per '(' + 1 per quantifier + 3: only walk rules that could be too deep
        if 2 * self.lexer.nesters + 3 > MAX_EXPR_DEPTH and _depth(expr) > MAX_EXPR_DEPTH:
            raise _error(f"rule '{name}' is nested more than {MAX_EXPR_DEPTH} levels deep", name.line, name.column)
        used, self._used = list(self._used), {}
        return (name, expr, used)

    def rules_first(self, c: list) -> list:
        return c

    def rules_add(self, c: list) -> list:
        c[0].append(c[2])
        return c[0]

    def no_rules(self, c: list) -> dict[str, Expr]:
        return {}

    def start(self, c: list) -> dict[str, Expr]:
        rules: dict[str, Expr] = {}
        lines: dict[str, int] = {}
        for name, expr, used in c[0]:
            key = name.value
            if key in rules:
                self.warnings.append(
                    (
                        None,
                        f"rule '{key}' is defined twice (lines {lines[key]} and {name.line}); "
                        "the last definition is used (as in llama.cpp)",
                    )
                )
            rules[key] = expr
            lines[key] = name.line
            self.references[key] = used
        return rules


_ANY = CharClass((), negated=True)


# ---------------------------------------------------------------- friendly errors

_WORDS = {
    "NAME": "a rule name",
    "DEFINE": "'::='",
    "LITERAL": "a string literal",
    "CLASS": "a character class",
    "TOKEN_ID": "a token",
    "TOKEN_TEXT": "a token",
    "DOT": "'.'",
    "LPAR": "'('",
    "RPAR": "')'",
    "VBAR": "'|'",
    "STAR": "'*'",
    "PLUS": "'+'",
    "QMARK": "'?'",
    "LBRACE": "'{'",
    "INT": "a number",
    "COMMA": "','",
    "RBRACE": "'}'",
    "NL": "a newline",
    "$END": "end of input",
}
_ATOM_START = frozenset({"LITERAL", "CLASS", "NAME", "TOKEN_ID", "TOKEN_TEXT", "DOT", "LPAR"})
_QUANTS = frozenset({"STAR", "PLUS", "QMARK", "LBRACE"})
_VALID_ESCAPE = re.compile(r"\\(?:x[0-9a-fA-F]{2}|u[0-9a-fA-F]{4}|U[0-9a-fA-F]{8}|[tnr\\\"\[\]\-])")
_HEX_DIGITS = {"x": 2, "u": 4, "U": 8}


def _expected_words(names: "set[str] | frozenset[str]") -> tuple[str, ...]:
    """Terminal names -> friendly words, in a fixed order ('an expression' groups the atoms)."""
    names = set(names) & set(_WORDS)
    out: list[str] = []
    if _ATOM_START <= names:
        out.append("an expression")
        names -= _ATOM_START
    if _QUANTS <= names:
        out.append("a repetition operator")
        names -= _QUANTS
    for n in _WORDS:
        if n in names and _WORDS[n] not in out:
            out.append(_WORDS[n])
    return tuple(out)


def _describe(tok: Token) -> str:
    t, v = tok.type, str(tok)
    short = v if len(v) <= 20 else v[:17] + "..."
    if t == "$END":
        return "end of input"
    if t == "NL":
        return "newline"
    if t == "NAME":
        return f"name '{v}'"
    if t == "INT":
        return f"number {short}"
    if t == "LITERAL":
        return f"string literal {short}"
    if t == "CLASS":
        return f"character class {short}"
    if t in ("TOKEN_ID", "TOKEN_TEXT"):
        return f"token {short}"
    return f"'{v}'"


def _line_col(text: str, pos: int) -> tuple[int, int]:
    line = text.count("\n", 0, pos) + 1
    return line, pos - (text.rfind("\n", 0, pos) + 1) + 1


def _missing_minimum(text: str, pos: int) -> "_SyntaxProblem | None":
    """`{,n}` / `{,}`: llama.cpp rejects them; suggest `{0,n}`."""
    j = pos - 1
    while j >= 0 and text[j] in " \t":
        j -= 1
    if j < 0 or text[j] != "{" or text[pos] != ",":
        return None
    m = re.compile(r",[ \t]*([0-9]*)").match(text, pos)
    n = m.group(1) if m else ""
    line, col = _line_col(text, j)
    if n:
        return _SyntaxProblem(f"a repetition needs a minimum: write {{0,{n}}} instead of {{,{n}}}", line, col)
    return _SyntaxProblem("a repetition needs a minimum: write {0,} (or *) instead of {,}", line, col)


def _bad_quoted(text: str, pos: int, close: str, what: str) -> _SyntaxProblem:
    """Why a string literal or character class starting at `pos` does not lex."""
    j = pos + 1
    while j < len(text):
        c = text[j]
        if c == "\x00":
            return _SyntaxProblem("NUL character in grammar", *_line_col(text, j))
        if c == "\\":
            m = _VALID_ESCAPE.match(text, j)
            if m is None:
                nxt = text[j + 1 : j + 2]
                if not nxt:
                    break
                if nxt in _HEX_DIGITS:
                    return _SyntaxProblem(f"escape '\\{nxt}' needs {_HEX_DIGITS[nxt]} hex digits", *_line_col(text, j))
                return _SyntaxProblem(f"unknown escape '\\{nxt}'", *_line_col(text, j))
            j = m.end()
            continue
        if c == close:
            break
        j += 1
    return _SyntaxProblem(f"unterminated {what}", *_line_col(text, pos))


def _char_problem(e: UnexpectedCharacters, text: str) -> _SyntaxProblem:
    pos = e.pos_in_stream
    c = text[pos]
    if c == "\x00":
        return _SyntaxProblem("NUL character in grammar", e.line, e.column)
    if c == '"':
        return _bad_quoted(text, pos, '"', "string literal")
    if c == "[":
        return _bad_quoted(text, pos, "]", "character class")
    if c == "!" and not text.startswith("<", pos + 1):
        return _SyntaxProblem("'!' must be followed by a token such as <[12]> or <|name|>", e.line, e.column)
    if c in "!<":
        if text.startswith("[", pos + 1 + (c == "!")):
            return _SyntaxProblem("malformed token id: write <[N]> with N a number", e.line, e.column)
        return _SyntaxProblem("unterminated token: missing '>'", e.line, e.column)
    return _SyntaxProblem(f"unexpected character {c!r}", e.line, e.column, _expected_words(e.allowed or set()))


def _token_problem(e: UnexpectedToken, text: str) -> _SyntaxProblem:
    tok = e.token
    expected = set(getattr(e, "accepts", None) or e.expected or ()) & set(_WORDS)
    if tok.type == "$END":
        line = getattr(tok, "end_line", None) or _line_col(text, len(text))[0]
        col = getattr(tok, "end_column", None) or _line_col(text, len(text))[1]
        return _SyntaxProblem("unexpected end of input", line, col, _expected_words(expected))
    if tok.type == "COMMA" and tok.start_pos is not None:
        hit = _missing_minimum(text, tok.start_pos)
        if hit is not None:
            return hit
    desc = _describe(tok)
    if tok.type == "DEFINE":
        start = text.rfind("\n", 0, tok.start_pos) + 1
        if not text[start : tok.start_pos].strip(" \t"):
            return _SyntaxProblem("'::=' needs a rule name before it", tok.line, tok.column, ("a rule name",))
        return _SyntaxProblem("unexpected '::=' (each rule must start on a new line)", tok.line, tok.column)
    if tok.type == "RPAR" and expected <= {"NL", "$END", "VBAR"}:
        return _SyntaxProblem("unexpected ')' with no '(' to close", tok.line, tok.column)
    if expected <= {"NAME", "$END"} and "NAME" in expected and "::=" in text[: tok.start_pos or 0]:
        return _SyntaxProblem(
            f"unexpected {desc} at the start of a rule "
            "(a rule continues on the next line only after '|' or inside parentheses)",
            tok.line,
            tok.column,
            ("a rule name",),
        )
    return _SyntaxProblem(f"unexpected {desc}", tok.line, tok.column, _expected_words(expected))


def _translate(e: UnexpectedInput, text: str, source: str) -> GrammarSyntaxError:
    """Lark's error -> GrammarSyntaxError with a friendly reason and expected set."""
    if isinstance(e, UnexpectedCharacters):
        p = _char_problem(e, text)
    elif isinstance(e, UnexpectedToken):
        p = _token_problem(e, text)
    else:  # UnexpectedEOF
        line, col = _line_col(text, len(text))
        p = _SyntaxProblem("unexpected end of input", line, col, _expected_words(set(getattr(e, "expected", ()))))
    return GrammarSyntaxError(p.reason, source=source, text=text, line=p.line, column=p.column, expected=p.expected)


@lru_cache(maxsize=1)
def _parser() -> tuple[Lark, GbnfLexer, LalrDriver, _Builder]:
    """Lark's parser for gbnf.lark (IR built in its callbacks), its lexer, our driver of its table, the builder."""
    builder = _Builder()
    lark = lalr_parser(
        (Path(__file__).with_name("gbnf.lark")).read_text(encoding="utf-8"),
        lexer=GbnfLexer,
        propagate_positions=False,
        maybe_placeholders=False,
        transformer=builder,
    )
    builder.lexer = lark.parser.lexer
    return lark, builder.lexer, LalrDriver(lark, builder), builder


_LOCK = threading.Lock()


def parse_gbnf(text: str, *, source: str = "<grammar>", root: str = "root") -> Grammar:
    """Parse llama.cpp GBNF into a checked Grammar (start rule `root`)."""
    return _parse(text, source, root)


def _parse(text: str, source: str, root: str, lark_loop: bool = False) -> Grammar:
    """parse_gbnf; `lark_loop` runs the table with Lark's own parser loop instead of LalrDriver (tests)."""
    if not isinstance(text, str):
        raise GrammarSyntaxError("grammar text must be a string", source=source)
    lark, lexer, driver, builder = _parser()
    with _LOCK, gc_paused():
        builder.reset()
        stack: list = []
        try:
            if lark_loop:
                rules = lark.parse(text)
            else:
                rules = driver.parse(lexer.tokens(text, lambda: driver.expected(stack[-1])), stack)
        except ParenDepthError as e:
            raise GrammarSyntaxError(str(e), source=source, text=text, line=e.line, column=e.column) from None
        except _SyntaxProblem as p:
            raise GrammarSyntaxError(
                p.reason, source=source, text=text, line=p.line, column=p.column, expected=p.expected
            ) from None
        except UnexpectedInput as e:
            raise _translate(e, text, source) from None
        except RecursionError:
            raise GrammarSyntaxError("grammar nested too deeply", source=source, text=text) from None
        warnings = [f"{source}:{line}: {w}" if line is not None else f"{source}: {w}" for line, w in builder.warnings]
        grammar = Grammar(rules=rules, root=root, source=source, warnings=warnings)
        return check_grammar(grammar, builder.references)
