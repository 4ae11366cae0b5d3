"""Lark nesting (issue 52): groups nest 200 deep as docs/constraints.md says, in every
shape, also when parse_lark is called from deep in a program's own stack; the 201st
level is refused with the caret on its opening bracket; a grammar of thousands of rules
(a long chain) is read, not refused as "nested too deeply" at 1:1."""

from __future__ import annotations

import pytest

from ministruct.check.grammar import check_text
from ministruct.errors import CompileLimitError, GrammarSyntaxError
from ministruct.grammar.lark.parse import parse_lark
from ministruct.grammar.lark.syntax import MAX_NESTING

CALLER_DEPTH = 300  # frames of the caller's own below parse_lark

SHAPES = {  # (the text before the nested part, one level's opening, one level's closing)
    "group": ("start: ", "(", ")"),
    "optional": ("start: ", "[", "]"),
    "repeat": ("start: ", "(", ")*"),
    "alternatives": ("start: ", '("b" | ', ")"),
    "terminal": ("start: A\nA: ", "(", ")"),
    "terminal alternatives": ("start: A\nA: ", '("b" | ', ")"),
    "lazy": ("start: a\na[lazy]: ", "(", ")"),
}


def _deep(k: int, f):
    return f() if k == 0 else _deep(k - 1, f)


def _nested(shape: str, depth: int) -> str:
    head, opening, closing = SHAPES[shape]
    return head + opening * depth + '"a"' + closing * depth + "\n"


@pytest.mark.parametrize("shape", SHAPES)
def test_groups_nest_200_deep_in_every_shape(shape):
    g = _deep(CALLER_DEPTH, lambda: parse_lark(_nested(shape, MAX_NESTING), source="F"))
    assert check_text(g, "a").accepted


@pytest.mark.parametrize("shape", SHAPES)
def test_the_201st_level_is_refused_at_its_bracket(shape):
    text = _nested(shape, MAX_NESTING + 1)
    with pytest.raises(GrammarSyntaxError) as e:
        parse_lark(text, source="F")
    head, opening, _ = SHAPES[shape]
    at = len(head) + MAX_NESTING * len(opening)  # offset of the 201st opening bracket
    line = text.count("\n", 0, at) + 1
    column = at - (text.rfind("\n", 0, at) + 1) + 1
    assert str(e.value).splitlines()[0] == f"F:{line}:{column}: groups nested deeper than 200 levels"


@pytest.mark.parametrize("n", [400, 3000])
def test_a_long_chain_of_rules_is_read(n):
    text = "start: r0\n" + "".join(f'r{i}: "x" r{i + 1}\n' for i in range(n)) + f'r{n}: "y"\n'
    g = _deep(CALLER_DEPTH, lambda: parse_lark(text, source="F"))
    assert check_text(g, "x" * n + "y").accepted and not check_text(g, "x" * (n - 1) + "y").accepted


def test_rules_nested_too_deep_before_their_first_character_are_not_called_left_recursion():
    text = "start: r0\n" + "".join(f'r{i}: r{i + 1} "x"\n' for i in range(600)) + 'r600: "y"\n'
    g = parse_lark(text, source="F")
    with pytest.raises(CompileLimitError, match="rules nested more than 512 deep before their first character"):
        check_text(g, "y" + "x" * 600)
