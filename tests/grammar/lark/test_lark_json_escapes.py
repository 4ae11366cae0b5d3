"""llguidance's `x-guidance` escape options in a `%json` block (grammar/lark/json_escapes.py):
`json_allowed_escapes` (the characters allowed after a backslash, `u` for `\\uXXXX` of a
control character) and `json_allow_general_unicode_escapes` (`\\uXXXX` of any character in
free strings, surrogate pairs whole). The verdicts are llguidance 1.9.1's (byte tokenizer);
where llguidance is installed the test asks it again."""

from __future__ import annotations

import json

import pytest

from ministruct.check.grammar import check_text
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema import SchemaOptions

GENERAL = {"json_allow_general_unicode_escapes": True}
CASES = [
    ({"type": "string"}, GENERAL, {'"\\u00e9"': True, '"\\uD83D\\uDE00"': True, '"\\uD83D"': False,
                                   '"\\uDE00\\uD83D"': False, '"\\u0041\\/"': False, '"\\/"': False, '"\\u002f"': True}),
    ({"type": "string"}, {"json_allow_general_unicode_escapes": False},
     {'"\\u00e9"': False, '"\\u0001"': True, '"\\u0041"': False, '"\\t"': True, '"\\/"': False}),
    ({"type": "string", "maxLength": 1}, GENERAL, {'"\\uD83D\\uDE00"': True, '"\\u00e9x"': False, '"\\u005c"': True}),
    ({"type": "string"}, {"json_allowed_escapes": "n"},
     {'"\\n"': True, '"\\t"': False, '"\\u000a"': False, '"\\\\"': False, '"é"': True}),
    ({"type": "string"}, {"json_allowed_escapes": "u"}, {'"\\u001e"': True, '"\\u0041"': False, '"\\n"': False}),
    ({"type": "string"}, {"json_allowed_escapes": "nu", **GENERAL}, {'"\\u0041"': True, '"\\t"': False, '"\\n\\u00e9"': True}),
    ({"const": "é"}, GENERAL, {'"é"': True, '"\\u00e9"': False}),  # const and pattern strings: control escapes only
    ({"const": 'a\n"/'}, GENERAL, {'"a\\n\\"/"': True, '"a\\u000a\\"/"': True, '"a\\u000A\\u0022/"': False,
                                   '"a\\n\\"\\/"': False}),
    ({"const": "a\n"}, {"json_allowed_escapes": "n"}, {'"a\\n"': True, '"a\\u000a"': False}),
    ({"enum": ["x\t", "😀"]}, {"json_allowed_escapes": "u"},
     {'"x\\u0009"': True, '"x\\t"': False, '"😀"': True, '"\\ud83d\\ude00"': False}),
    ({"type": "string", "pattern": "^[a-z\n]+$"}, GENERAL, {'"a\\nb"': True, '"a\\u000ab"': True, '"\\u0061"': False}),
    ({"type": "object"}, GENERAL, {'{"\\u00e9": "\\uD83D\\uDE00"}': True, '{"v": "\\uDE00"}': False, '{"\\/": 1}': False}),
    ({"type": "array", "items": {"type": "string"}}, {"json_allowed_escapes": '"\\u'},
     {'["\\"", "\\\\"]': True, '["\\n"]': False, '["\\u0001"]': True}),
]  # fmt: skip


def _grammar(schema: dict, options: dict) -> str:
    return "start: %json " + json.dumps(dict(schema, **{"x-guidance": options}))


@pytest.mark.parametrize("schema, options, verdicts", CASES, ids=lambda x: json.dumps(x)[:40])
def test_escapes_as_llguidance_writes_them(schema, options, verdicts):
    c = Constraint.from_lark(_grammar(schema, options), SchemaOptions(whitespace="flexible"))
    assert {t: check_text(c.grammar, t).accepted for t in verdicts} == verdicts


def test_without_the_options_every_json_escape_is_written():
    c = Constraint.from_lark('start: %json {"type": "string"}', SchemaOptions(whitespace="flexible"))
    assert all(check_text(c.grammar, t).accepted for t in ['"\\/"', '"\\u0041"', '"\\u00e9"', '"\\uD83D"'])


def test_the_verdicts_are_llguidance_s():
    llguidance = pytest.importorskip("llguidance")
    tok = llguidance.LLTokenizer("byte")
    for schema, options, verdicts in CASES:
        for text, verdict in verdicts.items():
            m = llguidance.LLMatcher(tok, llguidance.grammar_from("lark", _grammar(schema, options)), log_level=0)
            got = all(m.consume_token(b) for b in text.encode()) and m.is_accepting()
            assert got is verdict, (schema, options, text)
