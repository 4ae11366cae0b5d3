"""GBNF syntax errors: exact friendly messages, positions, excerpts (tested word for word)."""

from __future__ import annotations

import pytest

from ministruct.errors import GrammarError, GrammarSyntaxError
from ministruct.grammar.gbnf.parse import parse_gbnf

# (grammar text, the exact message str(error) must be)
CASES = [
    ('root ::= "a"{,10}', "<grammar>:1:13: a repetition needs a minimum: write {0,10} instead of {,10}"),
    ('root ::= "a"{,}', "<grammar>:1:13: a repetition needs a minimum: write {0,} (or *) instead of {,}"),
    ('root ::= "abc', "<grammar>:1:10: unterminated string literal"),
    ("root ::= [a-z", "<grammar>:1:10: unterminated character class"),
    ('root ::= "a\\qb"', "<grammar>:1:12: unknown escape '\\q'"),
    ('root ::= "\\x4"', "<grammar>:1:11: escape '\\x' needs 2 hex digits"),
    ("root ::= [\\u12]", "<grammar>:1:11: escape '\\u' needs 4 hex digits"),
    (
        'root ::= "a"\n  "b"',
        "<grammar>:2:3: unexpected string literal \"b\" at the start of a rule (a rule continues on the next line only after '|' or inside parentheses); expected a rule name",
    ),
    ('root ::= ("a" | "b"', "<grammar>:1:20: unexpected end of input; expected ')', '|'"),
    ('root ::= "a" )', "<grammar>:1:14: unexpected ')' with no '(' to close"),
    ('root = "a"', "<grammar>:1:6: unexpected character '='; expected '::=', a newline"),
    ('root ::= "a" |\nx ::= "b"', "<grammar>:2:3: unexpected '::=' (each rule must start on a new line)"),
    ('root ::= *"a"', "<grammar>:1:10: unexpected '*'; expected an expression, '|', a newline, end of input"),
    ('root ::= ""*', "<grammar>:1:12: '*' has nothing to repeat: the string literal before it is empty"),
    ("root ::= []+", "<grammar>:1:12: '+' has nothing to repeat: the character class before it is empty"),
    ('root ::= "a"{3,2}', "<grammar>:1:13: repetition {3,2} has its maximum below its minimum"),
    ('root ::= "a"{2001}', "<grammar>:1:14: repetition count 2001 exceeds llama.cpp's limit of 2000"),
    ('root ::= "a"{2,x}', "<grammar>:1:16: unexpected name 'x'; expected a number, '}'"),
    ('root ::= "a"{2', "<grammar>:1:15: unexpected end of input; expected ',', '}'"),
    ('root ::= !"a"', "<grammar>:1:10: '!' must be followed by a token such as <[12]> or <|name|>"),
    ("root ::= <[12]", "<grammar>:1:10: malformed token id: write <[N]> with N a number"),
    ("root ::= <[x]>", "<grammar>:1:10: malformed token id: write <[N]> with N a number"),
    ("root ::= <think", "<grammar>:1:10: unterminated token: missing '>'"),
    ('root ::= "\\U00110000"', "<grammar>:1:11: code point \\U00110000 is beyond U+10FFFF"),
    ('root ::= "a"\x00', "<grammar>:1:13: NUL character in grammar"),
    ("root ::= @", "<grammar>:1:10: unexpected character '@'; expected an expression, '|', a newline"),
    ("root ::= <[99999999999]>", "<grammar>:1:10: token id 99999999999 is out of range (at most 2147483647)"),
    ('::= "a"', "<grammar>:1:1: '::=' needs a rule name before it; expected a rule name"),
    ('root\n::= "a"', "<grammar>:1:5: unexpected newline; expected '::='"),
    ('root ::= "a" ::= "b"', "<grammar>:1:14: unexpected '::=' (each rule must start on a new line)"),
    ("root ::= [^]*", "<grammar>:1:13: '*' has nothing to repeat: the character class before it is empty"),
    (
        'root ::= ("a"\n"b")\n"c"',
        "<grammar>:3:1: unexpected string literal \"c\" at the start of a rule (a rule continues on the next line only after '|' or inside parentheses); expected a rule name",
    ),
    ('root ::= "a"{2}{,3}', "<grammar>:1:16: a repetition needs a minimum: write {0,3} instead of {,3}"),
    ('root ::= "a"{1,99999999999}', "<grammar>:1:16: repetition maximum 99999999999 is too large"),
]


@pytest.mark.parametrize("text, message", CASES)
def test_exact_message(text, message):
    with pytest.raises(GrammarSyntaxError) as info:
        parse_gbnf(text)
    assert str(info.value) == message


def test_table_is_large_enough():
    assert len(CASES) >= 15


def test_error_fields_and_excerpt():
    text = 'root ::= x\nx ::= "a" | ("b"\n  "c" |\n  "d"{,4})'
    with pytest.raises(GrammarSyntaxError) as info:
        parse_gbnf(text, source="my.gbnf")
    e = info.value
    assert (e.source, e.line, e.column, e.text) == ("my.gbnf", 4, 6, text)
    assert e.reason == "a repetition needs a minimum: write {0,4} instead of {,4}"
    assert e.excerpt() == '    "d"{,4})\n       ^'


def test_expected_set_is_in_friendly_words():
    with pytest.raises(GrammarSyntaxError) as info:
        parse_gbnf('root ::= "a" | *')
    assert info.value.expected == ("an expression", "'|'", "a newline", "end of input")


@pytest.mark.parametrize(
    "text, message",
    [
        ("", "<grammar>: the grammar defines no rules"),
        ("# only a comment\n", "<grammar>: the grammar defines no rules"),
        ('rot ::= "a"', "<grammar>: no rule named 'root' (the start rule)"),
        ("root ::= expr\nexpr ::= term\nterm ::= numero", "<grammar>: undefined rule 'numero' (used in rule 'term')"),
        (
            'root ::= root "a" | "b"',
            "<grammar>: left recursion: root -> root (llama.cpp rejects it too; use repetition instead)",
        ),
    ],
)
def test_grammar_errors(text, message):
    with pytest.raises(GrammarError) as info:
        parse_gbnf(text)
    assert str(info.value) == message
