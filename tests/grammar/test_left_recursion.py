"""left_recursion: left-recursive Lark grammars keep their language, against the `lark`
package's Earley parser (complete dynamic lexer: every split of the text into terminals)."""

from __future__ import annotations

import os
import random

import lark
import pytest
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ministruct.engine.automaton import accepts, automaton_for
from ministruct.errors import CompileLimitError, GrammarError
from ministruct.grammar.analysis import find_left_recursion
from ministruct.grammar.lark.parse import parse_lark

CALC = """
?start: sum
?sum: product | sum "+" product -> add | sum "-" product
?product: atom | product "*" atom
?atom: NUMBER | "-" atom | "(" sum ")"
%import common.NUMBER
%import common.WS_INLINE
%ignore WS_INLINE
"""


def _earley(text: str) -> lark.Lark:
    return lark.Lark(text, parser="earley", lexer="dynamic_complete")


def _agree(text: str, strings: list[str]) -> None:
    ours = parse_lark(text)
    assert find_left_recursion(ours) is None
    theirs = _earley(text)
    for s in strings:
        try:
            theirs.parse(s)
            want = True
        except lark.exceptions.LarkError:
            want = False
        assert accepts(ours, s) == want, (text, s)


def test_a_calculator_written_left_recursive_reads_as_lark_reads_it():
    _agree(
        CALC,
        ["1", "1+2", "1 + 2*3", "2*3*4", "(1+2)*-3 - 4", "-(-1)", "1+", "+1", "1 2", "1**2", "((1)"],
    )  # (no gap before the first lexeme or after the last: the `lark` package allows them, llguidance does not)


@pytest.mark.parametrize(
    "text, strings",
    [
        # indirect: a -> b -> a
        ('start: a\na: b "x" | "y"\nb: a "z" | "w"', ["y", "wx", "yzx", "wxzx", "yz", "x", "yzxzx", "wzx"]),
        # through a rule that may be empty, outside the cycle
        ('start: a\na: n a "x" | "y"\nn: "n" |', ["y", "yx", "nyx", "yxx", "nynyxx", "n", "ny", "xy"]),
        # a member that may be empty: list: list "," item | item |
        ('start: "[" l "]"\nl: l "," i | i |\ni: "1"', ["[]", "[1]", "[1,1]", "[,1]", "[1,]", "[1,1,1]"]),
        # inside a group, and behind an optional
        (
            'start: e\ne: (e "+" | "-" e | "(" e ")" ) "1" | "0" | ["~"] e "!"',
            ["0", "0+1", "-01", "(0)1", "~0!", "0!", "0+1+1", "~0+1!", "0+"],
        ),
        # three rules, each starting with the next
        (
            'start: a\na: b "1" | "x"\nb: c "2" | "y"\nc: a "3" | "z"',
            ["x", "y1", "z21", "x321", "x321321", "x32", "z2"],
        ),
    ],
)
def test_left_recursion_keeps_the_language(text, strings):
    _agree(text, strings)


def test_a_member_that_may_match_the_empty_string_is_split_first():
    # `a a "x"`: the second `a` comes first whenever the first matches the empty string
    _agree('start: a\na: a a "x" |', ["", "x", "xx", "xxx", "a", "xa"])
    _agree('start: r1\nr1: "b" | r2 r1\nr2: r1?', ["b", "bb", "bbb", "", "a"])


def test_a_rewrite_past_its_limit_is_refused_naming_the_cycle(monkeypatch):
    import ministruct.grammar.left_recursion as lr

    monkeypatch.setattr(lr, "MAX_ALTERNATIVES", 3)
    with pytest.raises(
        GrammarError, match=r"left recursion: a -> b -> a cannot be rewritten: .* more than 3 alternatives"
    ):
        parse_lark('start: a\na: b "x" | "y" | "z"\nb: a "1" | a "2" | "w" | "v"')


def test_gbnf_keeps_refusing_it_as_llama_cpp_does():
    from ministruct.grammar.gbnf import parse_gbnf

    with pytest.raises(GrammarError, match="left recursion: root -> root"):
        parse_gbnf('root ::= root "a" | "a"')


# random grammars: three rules over the letters a, b, c, each alternative up to three
# symbols (a letter, a rule, or one of them optional); strings drawn from the grammar and
# at random
_SYMBOL = st.sampled_from(['"a"', '"b"', '"c"', "r0", "r1", "r2", '"a"?', "r0?", "r1?", "r2?"])
_ALTERNATIVE = st.lists(_SYMBOL, min_size=1, max_size=3).map(" ".join)
_RULE = st.lists(_ALTERNATIVE, min_size=1, max_size=3).map(" | ".join)


def _sample(rules: dict[str, list[list[str]]], rng: random.Random, depth: int = 0, name: str = "r0") -> str | None:
    if depth > 8:
        return None
    out = []
    for sym in rng.choice(rules[name]):
        optional = sym.endswith("?")
        sym = sym.rstrip("?")
        if optional and rng.random() < 0.5:
            continue
        if sym.startswith('"'):
            out.append(sym.strip('"'))
        else:
            got = _sample(rules, rng, depth + 1, sym)
            if got is None:
                return None
            out.append(got)
    return "".join(out)


@settings(
    max_examples=int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
    derandomize=True,
)
@given(
    st.lists(_RULE, min_size=3, max_size=3),
    st.lists(st.text("abc", max_size=6), max_size=8),
    st.integers(0, 2**32 - 1),
)
def test_random_left_recursive_grammars_agree_with_earley(bodies, texts, seed):
    rules = {f"r{i}": [alt.split() for alt in body.split(" | ")] for i, body in enumerate(bodies)}
    assume(any(alt[0].rstrip("?") == name or alt[0].startswith("r") for name, alts in rules.items() for alt in alts))
    text = "start: r0\n" + "".join(f"{n}: {b}\n" for n, b in zip(rules, bodies))
    try:
        theirs = _earley(text)
    except lark.exceptions.GrammarError:
        assume(False)  # (rules Lark itself refuses: none that derive nothing, ...)
    try:
        ours = parse_lark(text)
    except GrammarError as e:
        raise AssertionError(f"{text!r}: {e}") from None  # (every such grammar is rewritten)
    TRIED.append(text)
    rng = random.Random(seed)
    drawn = [s for s in (_sample(rules, rng) for _ in range(10)) if s is not None]
    try:
        automaton_for(ours)
    except GrammarError as e:  # no string at all (`r0: r0`): Earley finds none either
        assert "matches no string" in str(e) and not drawn, e
        ours = None
    for s in drawn + texts:
        try:
            theirs.parse(s)
            want = True
        except lark.exceptions.LarkError:
            want = False
        try:
            got = ours is not None and accepts(ours, s)
        except CompileLimitError:  # the engine's limit on parses alive at once (r0: r0? r1? "a", ...)
            TOO_AMBIGUOUS.append(text)
            continue
        assert got == want, (text, s)


TRIED: list[str] = []
TOO_AMBIGUOUS: list[str] = []


def test_few_random_grammars_reach_the_engines_ambiguity_limit():
    # (runs after the random test: most of its grammars are checked in full; 17 of about
    # 150 reached the limit on some string in one run)
    assert TRIED and len(set(TOO_AMBIGUOUS)) <= len(set(TRIED)) // 4, (len(set(TRIED)), TOO_AMBIGUOUS)
