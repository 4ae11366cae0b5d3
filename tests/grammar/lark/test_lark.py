"""The Lark front end's meaning and errors, checked through the engine's automaton
against independent oracles (Python `re` on every short string, hand-written languages)."""

from __future__ import annotations

import itertools
import re

import pytest

from ministruct.check.grammar import check_text
from ministruct.errors import CompileLimitError, GrammarSyntaxError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.export import with_gaps
from ministruct.grammar.ir import TokenRef, walk
from ministruct.grammar.lark import parse_lark


def accepts(text: str, s: str) -> bool:
    return check_text(Constraint.from_lark(text).grammar, s).accepted


def strings(alphabet: str, n: int):
    for k in range(n + 1):
        for t in itertools.product(alphabet, repeat=k):
            yield "".join(t)


def test_ignore_fills_gaps_between_lexemes_only():
    # llguidance's reading (test_lark_llguidance checks it there): no gap before the first
    # lexeme, none after the last, none inside a terminal
    g = '%ignore " "\nstart: "a" B\nB: "b" "c"'
    assert accepts(g, "abc") and accepts(g, "a  bc")
    assert not accepts(g, " abc") and not accepts(g, "abc ") and not accepts(g, "ab c")
    nested = '%ignore " "\nstart: x+ "z"\nx: "" | "y" x?'
    assert accepts(nested, "y yz") and accepts(nested, "z") and not accepts(nested, " z")


NESTED_SKIPS = {  # llguidance 1.9.1's verdicts (byte tokenizer); the differential table has more
    'start: "x" inner "y"\ninner: %lark {\n start: "a" "b"?\n %ignore " "\n}': {
        "xa y": True,  # the block's skip after its lexeme, then the outer grammar's
        "xa by": True,
        "xab y": False,  # the block is done: the outer grammar (no skip) is what may follow
        "x ay": False,  # no skip before a block's first lexeme
    },
    'start: inner\ninner: %lark {\n start: "a" "b"?\n %ignore " "\n}': {"a ": True, "a b": True, "ab ": False},
    'start: "x" inner "y"\n%ignore " "\ninner: %lark {\n start: "a" "b"?\n}': {
        "xa y": False,  # after the block's lexeme, its class (no skip) while it may go on
        "xab y": True,
        "x ay": False,
    },
    'start: "x" i "y"\n%ignore " "\ni: %lark {\n start: "a" "b"?\n %ignore " "\n}': {
        "x a b y": True,  # the same skip: one class, as the outer grammar's
    },
    'start: "x" i "y"\ni: %lark {\n start: "a" j? "c"\n j: %lark {\n  start: "b" "d"?\n  %ignore "-"\n }\n'
    ' %ignore " "\n}': {"xab-cy": True, "xab cy": False, "xabd cy": True, "xa cy": True, "xa bcy": False},
}


@pytest.mark.parametrize("grammar", sorted(NESTED_SKIPS))
def test_a_nested_grammar_s_skip_is_its_lexemes_class_s(grammar):
    """A `%lark` block's `%ignore` is allowed after its own lexemes while one of them may
    follow (the trailing one too), else the enclosing grammar's (llguidance's classes)."""
    for text, verdict in NESTED_SKIPS[grammar].items():
        assert accepts(grammar, text) is verdict, text
    wide = with_gaps(Constraint.from_lark(grammar).grammar)  # (what llama.cpp servers are sent holds them)
    assert all(check_text(wide, t).accepted for t, v in NESTED_SKIPS[grammar].items() if v)


def test_an_empty_literal_is_no_lexeme():
    g = '%ignore " "\nstart: "" "a"'
    assert accepts(g, "a") and not accepts(g, " a")


def test_allow_initial_skip_option():
    g = '%llguidance {"allow_initial_skip": true}\n%ignore " "\nstart: "a"'
    assert accepts(g, " a") and accepts(g, "a") and not accepts(g, "a ")


def accepts_cfl(text: str, s: str) -> bool:
    return check_text(Constraint.from_lark(text, lexer="cfl").grammar, s).accepted


def test_greedy_lexer_difference_is_the_cfg_language():
    # the greedy lexer (the default, llguidance's) takes "ab" as one WORD and then finds no
    # second WORD, so it rejects "ab"; the context-free language over the terminals holds it (a|b).
    g = "start: WORD WORD\nWORD: /[a-z]+/"
    assert accepts_cfl(g, "ab") and accepts_cfl(g, "abc")
    assert not accepts_cfl(g, "a")
    assert not accepts(g, "ab") and not accepts(g, "abc") and not accepts(g, "a")
    assert check_text(Constraint.from_lark(g).grammar, "ab", prefix=True).accepted  # (a WORD goes on for ever)


SQL = 'start: "SELECT" NAME [NAME] "FROM" NAME\nNAME: /[a-z]+/i\n%import common.WS\n%ignore WS\n'


@pytest.mark.parametrize(
    "grammar, text, greedy, cfl",
    [
        (SQL, "SELECT aFROMb", False, True),  # a keyword inside a name: one name to a lexer
        (SQL, "SELECTa FROM b", True, True),  # only SELECT may stand there: it ends where a name starts
        (SQL, "SELECT a FROMb", False, True),  # FROMb is the alias: FROM is still to come
        (SQL, "SELECT a FROM b", True, True),
        (SQL, "SELECT a FROM b ", False, False),  # no skip after the last lexeme
        (SQL, "SELECT a c FROM b", True, True),
        (SQL, "SELECT a FROMx", False, True),  # FROM dies: the alias NAME goes on
        (SQL, " SELECT a FROM b", False, False),
        ('start: ("list" | "listen") "ed"', "listed", False, True),  # "list" goes on as "listen"
        ('start: ("list" | "listen") "ed"', "listened", True, True),
        ('start: ("a" | "ab") "bc"', "abc", False, True),
        ('start: "a" "b"?\n%ignore " "', "a ", True, False),  # trailing skip: "b" may follow
        ('start: "a"\n%ignore " "', "a ", False, False),
        ('start: "a" B "c"\nB: /b*/', "ac", True, True),  # a lexeme that may be empty is optional
        ('start: "a" B "c"\nB: /b*/', "abbc", True, True),
        ("start: A B\nA: /a+/\nB: /a/", "aa", False, True),
        # llguidance issue 57: the greedy lexer needs more than one byte of lookahead here
        ("start: A B | C\nA: /aaa/\nB: /b+x/\nC: /a+b+z/", "aaabbx", False, True),
    ],
)
def test_greedy_and_cfl_readings(grammar, text, greedy, cfl):
    assert accepts(grammar, text) == greedy
    assert accepts_cfl(grammar, text) == cfl


@pytest.mark.parametrize(
    "lark_body, python",
    [
        ("/[a-c]+/ & /[b-d]+/", r"[bc]+"),
        ("/[ab]*/ & ~/.*aa.*/", r"(?!.*aa)[ab]*"),
        ("~/a*/", r"(?!a*\Z).*"),
        ('("a" | "b"){1,3} & ~"ab"', r"(?!ab\Z)[ab]{1,3}"),
    ],
)
def test_intersection_and_complement_against_re(lark_body, python):
    g = parse_lark(f"start: T\nT: {lark_body}")
    for s in strings("abcd", 4):
        assert check_text(g, s).accepted == bool(re.fullmatch(python, s, re.S)), s


def test_regex_flags_and_case_insensitive_strings():
    assert accepts("start: /a.b/s", "a\nb") and not accepts("start: /a.b/", "a\nb")
    assert accepts('start: "Hi"i', "hI") and not accepts('start: "Hi"', "hI")
    assert accepts('start: "s"i', "\u017f") and not accepts('start: "i"i', "\u0131")  # ſ is s, ı is not i
    assert accepts("start: /a b/x", "ab")


def test_repetitions_and_ranges():
    g = 'start: ab{2,3} "x"~2 ("y" ~ 1..2)\nab: "a".."b"'
    assert accepts(g, "abxxy") and accepts(g, "bbbxxyy")
    assert not accepts(g, "axxy") and not accepts(g, "abxy")
    assert accepts('start: "a"{,2}', "") and not accepts('start: "a"{,2}', "aaa")


def test_common_imports_and_aliases():
    g = '%import common.SIGNED_NUMBER -> N\n%import common (WS)\n%ignore WS\nstart: N ("," N)*'
    assert accepts(g, "1, -2.5e3 ,+7") and not accepts(g, "1,,2")
    assert accepts("%import common.ESCAPED_STRING\nstart: ESCAPED_STRING", '"a\\"b"')
    assert not accepts("%import common.ESCAPED_STRING\nstart: ESCAPED_STRING", '"a"b"')


def test_json_and_substrings_and_nested():
    g = 'start: "v=" %json {"type": "integer", "minimum": 3} ";" %regex {"substring_chars": "xyz"}'
    assert accepts(g, "v=12;yz") and accepts(g, "v=3;") and not accepts(g, "v=2;x") and not accepts(g, "v=3;xz")
    g = 'start: "[" %lark { start: "a" | "b" x\nx: "c" } "]"'
    assert accepts(g, "[a]") and accepts(g, "[bc]") and not accepts(g, "[b]")


def test_special_tokens_are_token_atoms():
    g = parse_lark("start: <|im_end|> | <[5-6]> | <[^7]>")
    refs = {x for body in g.rules.values() for x in walk(body) if isinstance(x, TokenRef)}
    assert refs == {TokenRef(name="<|im_end|>"), TokenRef(5), TokenRef(6), TokenRef(7, negated=True)}


@pytest.mark.parametrize(
    "text, line, column, words",
    [
        ("start: foo\nfoo[lazy]: bar\nbar: /a/", 2, 12, "terminals"),
        ('start: foo\nfoo[stop="a", suffix="b"]: /x/', 2, 15, "stop` and `suffix"),
        ('start: r\nr[lazy]: "a" r | "b"', 2, 14, "'r' is a rule"),
        ("start: r\nr[suffix=sub]: /a/\nsub: /b/", 2, 10, "UPPERCASE terminal"),
        ('start: r\nr[suffix=""]: /a/', 2, 10, "empty"),
        ('start: r\nr[stop_capture="m"]: /a/', 2, 3, "needs `stop` or `suffix`"),
        ('start: r\nr[stop="x", stop_capture="bad name"]: /a/', 2, 26, "not a valid capture name"),
        ('start: r\nr[lazy]: %json {"type": "string"}', 2, 10, "%json"),
        ("start: r\nr[lazy, max_tokens=3]: /a/", 2, 9, "max_tokens"),
        ('start: a\na.2: "x"', 2, 2, "priorities"),
        ('%declare X\nstart: "a"', 1, 1, "%declare"),
        ('start: "a"\n%override start: "b"', 2, 1, "%override"),
        ('start: x{y}\nx: "a"', 1, 8, "templates"),
        ("start: foo::0", 1, 11, "parametric"),
        ('start: "a" & "b"', 1, 12, "only supported for terminals"),
        ("start: MISSING", 1, 8, "unknown name"),
        ('start: T\nT: t\nt: "a"', 2, 4, "cannot reference rule"),
        ('start: "a"\n  | %json {"type": "kaboom"}', 2, 5, "JSON schema"),
        ("start: /[a/", 1, 8, "regular expression"),
        ('start: "ab".."c"', 1, 8, "single character"),
        ('start: "a"{3,1}', 1, 14, "range end"),
        ('start: foo\nfoo[max_tokens=3]: "a"', 2, 5, "max_tokens"),
        ('%llguidance {"bogus": 1}\nstart: "a"', 1, 1, "unknown field"),
        ('x: "a"', 1, 1, "no start rule"),
    ],
)
def test_errors_name_the_place_and_the_feature(text, line, column, words):
    with pytest.raises(GrammarSyntaxError) as info:
        parse_lark(text)
    e = info.value
    assert (e.line, e.column) == (line, column), str(e)
    assert words in e.reason
    assert e.excerpt().endswith("^")


def test_left_recursion_is_read_as_llguidance_reads_it():
    # (unlike GBNF, where llama.cpp refuses it: tests/grammar/test_left_recursion.py)
    text = 'start: start "a" | "a"'
    assert [accepts(text, s) for s in ("a", "aaa", "", "b")] == [True, True, False, False]


def test_bounded_work():
    with pytest.raises(GrammarSyntaxError, match="nested deeper"):
        parse_lark("start: " + "(" * 300 + '"a"' + ")" * 300)
    with pytest.raises(CompileLimitError):
        Constraint.from_lark('start: "a"{1000000}')
    deep = "start: " + "%lark { start: " * 10 + '"a"' + " }" * 10
    with pytest.raises(GrammarSyntaxError, match="nested deeper"):
        parse_lark(deep)


def test_a_real_grammar_reads_without_warnings():
    from pathlib import Path

    text = (Path(__file__).resolve().parents[3] / "benchmarks" / "grammars" / "sql_select.lark").read_text()
    g = parse_lark(text)
    assert g.warnings == []
    for good in (
        "SELECT a, COUNT(*) AS n FROM t WHERE x >= 3 AND b LIKE 'a%' GROUP BY a ORDER BY n DESC LIMIT 5;",
        "select * from t join u on t.id = u.id",
    ):
        assert check_text(g, good).accepted, good
    for bad in ("SELECT FROM t", " SELECT a FROM t", "SELECT a FROM t LIMIT x", "SELECT aFROM t"):
        assert not check_text(g, bad).accepted, bad
    # a skip at the end while a lexeme (here the optional ";") may still follow, as llguidance
    assert check_text(g, "SELECT a FROM t ").accepted
    assert not check_text(parse_lark(text, lexer="cfl"), "SELECT a FROM t ").accepted


def test_a_json_block_is_flexible_unless_the_options_say_otherwise():
    text = 'start: %json {"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]}'
    assert accepts(text, '{ "a" : 1 }') and accepts(text, '{"a":1}')
    compact = Constraint.from_lark(text, whitespace="compact").grammar
    assert not check_text(compact, '{ "a" : 1 }').accepted and check_text(compact, '{"a":1}').accepted


@pytest.mark.parametrize(
    "pattern, good, bad",
    [
        (r"\u{43}\x{44}\U{1F600}", "CD\U0001f600", "CD"),  # llguidance's (Rust's) braced escapes
        (r"[\u{41}-\u{43}]+", "ABCA", "D"),
        (r"\cA\cz", "\x01\x1a", "cA"),  # a control character (ECMAScript's, XGrammar's)
        (r"(?<year>[0-9]{2})-(?P<m>[0-9])", "26-1", "2-1"),  # named groups, both spellings
        (r"[(?<n>]+", "(?<n", "x"),  # inside a class: characters
        (r"\\u{2}", "\\uu", "\\u{2}"),  # an escaped backslash, then `u` twice
    ],
)
def test_the_peers_regex_escapes_and_named_groups(pattern, good, bad):
    g = f"start: /{pattern}/"
    assert accepts(g, good) and not accepts(g, bad)


def test_a_braced_escape_past_unicode_is_refused_at_its_place():
    with pytest.raises(GrammarSyntaxError, match="no character") as info:
        parse_lark("start: /a\\u{110000}/")
    assert info.value.line == 1


def test_free_text_then_a_greedy_lark_answer_keeps_its_lexer():
    from ministruct.grammar.think import free_text_then

    answer = parse_lark(SQL)
    g = free_text_then(answer, close="</think>")
    assert g.lexer == answer.lexer
    assert check_text(g, "hmm SELECT x</think>SELECT a FROM b").accepted
    assert not check_text(g, "hmm</think>SELECT aFROMb").accepted
    assert check_text(free_text_then(parse_lark(SQL, lexer="cfl"), close="</think>"), "</think>SELECT aFROMb").accepted
