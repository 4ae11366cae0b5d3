"""Regex front end: each construct against re.fullmatch, and grammar_to_regex."""

from __future__ import annotations

import itertools
import re

import pytest

from ministruct.engine.automaton import accepts
from ministruct.errors import GrammarError
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, RuleRef, Seq, TokenRef
from ministruct.grammar.regex.parse import grammar_to_regex, parse_regex


def strings(alphabet: str, max_len: int) -> list[str]:
    return ["".join(t) for n in range(max_len + 1) for t in itertools.product(alphabet, repeat=n)]


def assert_same_language(pattern: str, texts: list[str]) -> None:
    g = parse_regex(pattern)
    rx = re.compile(pattern)
    printed = re.compile(grammar_to_regex(g))
    for s in texts:
        want = rx.fullmatch(s) is not None
        assert accepts(g, s) == want, (pattern, s, want, g.to_gbnf())
        assert (printed.fullmatch(s) is not None) == want, (pattern, s, printed.pattern)


# (pattern, alphabet, max length): every string up to that length is compared with re.
EXHAUSTIVE = [
    # literals, alternation, groups, empties
    ("abc", "abc", 4),
    ("a|", "ab", 3),
    ("()", "a", 2),
    ("", "a", 2),
    ("(?:)", "a", 2),
    ("(())", "a", 2),
    ("()|()", "a", 2),
    ("a()b", "ab", 3),
    ("(a|)", "ab", 2),
    ("ab(c|)", "abc", 3),
    ("abc|de(f|g)", "abcdefg", 3),
    ("(?P<x>ab)c", "abc", 4),
    ("a|b|ab|", "ab", 3),
    # quantifiers, greedy and lazy (same language)
    ("a*", "ab", 4),
    ("a+", "ab", 4),
    ("a?", "ab", 3),
    ("a*?", "ab", 4),
    ("a+?", "ab", 4),
    ("a??", "ab", 3),
    ("a{2}", "ab", 4),
    ("a{2,}", "ab", 5),
    ("a{,2}", "ab", 4),
    ("a{1,3}", "ab", 5),
    ("a{1,3}?", "ab", 5),
    ("a{0}", "ab", 2),
    ("a{0,0}b", "ab", 3),
    ("a{,}", "ab", 4),
    ("(ab|a)*b", "ab", 5),
    ("[ab]{2,3}", "abc", 4),
    ("(a*)*", "ab", 4),
    ("(a|)+", "ab", 4),
    ("(?:a?){2,3}b", "ab", 5),
    ("(a|b)?[a-c]+(abc)*", "abc", 4),
    ("(a|[bc]{2,}){2,3}", "abc", 5),
    # `{` that is not a quantifier is a literal
    ("a{}", "a{}", 3),
    ("a{1,x}", "a{1,x}", 6),
    ("{", "{a", 2),
    ("a{,", "a{,", 3),
    ("x{1", "x{1", 3),
    # classes
    ("[ab]", "abc", 2),
    ("[^a]", "ab\n", 2),
    ("[a-c]+", "abcd", 3),
    ("[]a]", "]ab", 2),
    ("[^]a]", "]ab", 2),
    ("[a-]", "a-b", 2),
    ("[-a]", "a-b", 2),
    ("[a-b-c]", "abc-", 2),
    ("[--/]", "-./0", 2),
    ("[\\]\\-]", "]-a", 2),
    ("[\\n\\t]", "\n\t ", 2),
    ("[\\b]", "\bb", 2),
    ("[.]", ".a", 2),
    ("[*+?{}()|^$]", "*+?{}()|^$a", 1),
    # dot and DOTALL
    (".", "a\n", 2),
    ("(?s).", "a\n", 2),
    ("(?s:.)(?-s:.)", "a\n", 3),
    (".*", "a\n", 3),
    # anchors, exact wherever they appear (without MULTILINE)
    ("^abc$", "abc\n", 4),
    ("^", "a", 1),
    ("$", "a\n", 2),
    ("^$", "a\n", 2),
    ("a$", "a\n", 3),
    ("a$\n", "a\n", 3),
    ("$\n", "a\n", 2),
    ("(a$|b)\n?", "ab\n", 3),
    ("a?^b", "ab", 3),
    ("(?:^a|b)*", "ab", 4),
    ("\\Aa\\Z", "a\n", 3),
    ("a\\Z\n?", "a\n", 3),
    ("(?:a|$)*", "a\n", 3),
    ("(^|a)+b", "ab", 4),
    ("(?:a$)*\n", "a\n", 3),
    ("(?:$\n)+", "\n", 3),
    ("^$|^a\\.b/", "a.b/", 4),
    ("b(?:^a)?", "ab", 3),
    ("a\\Z|b$|c", "abc\n", 3),
    ("(?:\\Z)?a", "a", 2),
    ("x(?:$|y)*\n*", "xy\n", 4),
    # MULTILINE anchors where they can be decided
    ("(?m)^a$", "a\n", 3),
    ("(?m)a$\n?", "a\n", 3),
    ("(?m)^a|b$", "ab\n", 3),
    # inline flags and verbose mode
    ("(?i)ab", "abAB", 3),
    ("(?i:a)b", "abAB", 3),
    ("a(?i:b)", "abAB", 3),
    ("(?x)a b", "ab ", 3),
    ("(?x)a\\ b", "ab ", 3),
    ("(?x)[ ]a", "a ", 3),
    ("(?x)a # comment\nb", "ab #", 3),
    ("(?x)a *", "a *", 3),
    ("(?x)a{1, 2}", "a{1, 2}", 1),
    ("(?x: a b ) c", "abc ", 4),
    ("(?x)(?-x: a)", "a ", 3),
    ("a(?#note)*", "a", 3),
    ("(?i)[^k]", "kKx", 2),
    ("(?i)[a-c]", "aBCd", 2),
    ("(?x)(?i)a", "aA ", 2),
]


@pytest.mark.parametrize("pattern,alphabet,n", EXHAUSTIVE, ids=[repr(c[0]) for c in EXHAUSTIVE])
def test_exhaustive_agreement_with_re(pattern: str, alphabet: str, n: int) -> None:
    assert_same_language(pattern, strings(alphabet, n))


EXPLICIT = [
    (r"\n\t\r\f\v\a\0", ["\n\t\r\f\v\a\0", "\n\t\r\f\v\a", "\\n"]),
    (r"\x41\u00e9\U0001F600\N{BULLET}\101\07\x7f", ["Aé😀•A\x07\x7f", "Aé😀•A\x07", "x41"]),
    (r"\0101", ["\x081", "A", "\x08"]),
    (r"[\x41-\x43\u00e9\101-\103]+", ["ABC", "é", "D", "ABé"]),
    (r"\^\$\.\*\+\?\\\(\)\[\]\{\}\|\/", ["^$.*+?\\()[]{}|/", "^$"]),
    (r"ww我😁", ["ww我😁", "ww我"]),
    (r"\d+", ["0123", "١٢٣", "๓", "a", "²", ""]),
    (r"\w+", ["a_1", "é", "我", "ª", "-", "²", "\u0345"]),
    (r"\s+", [" \t\n\r\f\v", "\x1c\x1d\x1e\x1f\x85\xa0\u2028\u3000", "\u200b", "a"]),
    (r"\D\W\S", ["a-a", "1 a", "a a"]),
    (r"(?a)\w\d\s", ["a1 ", "é1 ", "a١ ", "a1\xa0"]),
    (r"(?i)straße", ["STRASSE", "straße", "STRAẞE", "Straße"]),
    (r"(?i)k", ["k", "K", "\u212a", "x"]),
    (r"(?ai)k", ["k", "K", "\u212a"]),
    (r"(?i)[^\W\d]", ["a", "Σ", "1", "_", "-"]),
    (r"\$\d+(?:\.\d\d)?", ["$12", "$12.50", "$1.5", "12"]),
]


@pytest.mark.parametrize("pattern,texts", EXPLICIT, ids=[repr(c[0]) for c in EXPLICIT])
def test_explicit_agreement_with_re(pattern: str, texts: list[str]) -> None:
    assert_same_language(pattern, texts)


def _code_points(g: Grammar) -> set[int]:
    e = g.rules[g.root]
    if isinstance(e, Literal):
        return {ord(e.text)} if len(e.text) == 1 else set()
    assert isinstance(e, CharClass), e
    return {c for a, b in e.code_point_ranges() for c in range(a, b + 1)}


ALL = "".join(map(chr, range(0x110000)))


@pytest.mark.parametrize("pattern", [r"\d", r"\w", r"\s", r"\W", r"(?a:\w)", r"(?a:\S)", r"."])
def test_categories_match_re_on_every_code_point(pattern: str) -> None:
    rx = re.compile(pattern)
    want = {i for i, c in enumerate(ALL) if rx.fullmatch(c)}
    assert _code_points(parse_regex(pattern)) == want


CASE_SAMPLES = "ksiSIßΣσςµİıǅΩΩﬀᲀ\U00010400aZ1_ſK\u0345ͅι"


@pytest.mark.parametrize("flags", ["i", "ai"])
def test_ignorecase_literals_match_re_on_every_code_point(flags: str) -> None:
    for ch in CASE_SAMPLES:
        rx = re.compile(f"(?{flags}:{re.escape(ch)})+")
        want = {i for m in rx.finditer(ALL) for i in range(m.start(), m.end())}
        assert _code_points(parse_regex(f"(?{flags}){re.escape(ch)}")) == want, ch


@pytest.mark.parametrize(
    "cls", ["[a-z]", "[^k]", "[K-k]", "[\\W]", "[^\\w\\d]", "[ſ-ǅ]", "[ς]", "[\U00010400-\U00010410]"]
)
def test_ignorecase_classes_match_re_on_every_code_point(cls: str) -> None:
    rx = re.compile(f"(?i:{cls})+")
    want = {i for m in rx.finditer(ALL) for i in range(m.start(), m.end())}
    assert _code_points(parse_regex(f"(?i){cls}")) == want


def test_result_is_a_single_root_rule_with_source() -> None:
    g = parse_regex("a(b|c)*", source="pat.txt")
    assert list(g.rules) == ["root"] and g.root == "root" and g.source == "pat.txt"
    assert g.to_gbnf() == 'root ::= "a" ("b" | "c")*\n'


def test_re_warnings_are_kept() -> None:
    g = parse_regex("[[a]")
    assert any("nested set" in w for w in g.warnings)


# ---------------------------------------------------------------- grammar_to_regex


def test_grammar_to_regex_inlines_rules() -> None:
    g = Grammar({"root": Seq((RuleRef("d"), Literal("."), RuleRef("d"))), "d": Repeat(CharClass(((48, 57),)), 1, 3)})
    rx = grammar_to_regex(g)
    assert re.compile(rx)
    for s in ["1.2", "123.456", "1234.1", ".1", "1."]:
        assert (re.fullmatch(rx, s) is not None) == accepts(g, s), s


def test_grammar_to_regex_refuses_recursion_and_tokens() -> None:
    rec = Grammar({"root": Seq((Literal("("), Repeat(RuleRef("root"), 0, 1), Literal(")")))})
    with pytest.raises(GrammarError, match=r"rule root is recursive \(root -> root\)"):
        grammar_to_regex(rec)
    tok = Grammar({"root": Seq((Literal("a"), TokenRef(token_id=7)))})
    with pytest.raises(GrammarError, match=r"whole token <\[7\]>"):
        grammar_to_regex(tok)
    with pytest.raises(GrammarError, match="not defined"):
        grammar_to_regex(Grammar({"root": RuleRef("nope")}))


@pytest.mark.parametrize(
    "expr,texts",
    [
        (CharClass((), negated=True), ["a", "\n", "😀", ""]),
        (Repeat(Repeat(Literal("ab"), 1, 2), 2, 2), ["abab", "ababab", "ab", "abababab", "ababababab"]),
        (Seq((Literal("a b#"), CharClass(((0, 31), (0x2028, 0x2029))))), ["a b#\n", "a b#\u2029", "a b# "]),
        (Repeat(Literal(""), 0, None), ["", "a"]),
        # surrogates print as escapes; no UTF-8 output can hold one, so no text tests them
        (CharClass(((0xD800, 0xDFFF), (ord("-"), ord("-")), (ord("]"), ord("^")))), ["-", "]", "^", "a", ""]),
    ],
)
def test_grammar_to_regex_prints_ir_exactly(expr, texts) -> None:
    g = Grammar({"root": expr})
    rx = grammar_to_regex(g)
    for s in texts:
        assert (re.fullmatch(rx, s) is not None) == accepts(g, s), (rx, s)


def test_empty_language_prints_as_a_class_matching_nothing() -> None:
    g = parse_regex("a^b|c\\Zd")  # valid for re, matches nothing
    assert g.rules["root"] == CharClass(())
    rx = grammar_to_regex(g)
    assert all(re.fullmatch(rx, s) is None for s in ["", "a", "ab", "cd", "\U0010ffff", "\x00"])
