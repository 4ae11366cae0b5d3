"""Lark warnings name only the grammar's own rules that nothing uses (issue 52: rules
used but rewritten for left recursion, and lazy lexemes' helpers such as `r-lazy-1`,
were called unreachable; a %ignore grammar with an unused rule was refused)."""

from __future__ import annotations

import pytest

from ministruct.check.grammar import check_text
from ministruct.grammar.lark.parse import parse_lark


@pytest.mark.parametrize(
    "text, member, warnings",
    [
        ('start: a\na: e a "x" | "y"\ne: "q"?\n', "qyx", []),
        ('start: s\ns: s s s | s s | "a" | ""\n', "aaa", []),
        ("start: r\nr[lazy]: /.*/\n", "", []),
        ('start: "a"\nunused: "b"\n', "a", ["rule 'unused' is unreachable from 'start'"]),
        (
            'start: "a"\n%ignore " "\nunused: "b" x\nx: "c"\n',
            "a",
            ["rule 'unused' is unreachable from 'start'", "rule 'x' is unreachable from 'start'"],
        ),
        ('start: %lark {\nstart: "a"\nu: "b"\n}\n', "a", ["rule 'u' is unreachable from 'start'"]),
    ],
)
def test_only_unused_rules_of_the_grammar_are_warned_about_by_their_names(text, member, warnings):
    g = parse_lark(text)
    assert g.warnings == warnings
    assert check_text(g, member).accepted
