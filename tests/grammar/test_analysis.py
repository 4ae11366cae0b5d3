"""analysis: nullable rules, left recursion (through nullable prefixes), undefined/missing/unreachable rules."""

from __future__ import annotations

import pytest

from ministruct.errors import GrammarError
from ministruct.grammar.analysis import check_grammar, find_left_recursion, nullable_rules
from ministruct.grammar.gbnf.parse import parse_gbnf
from ministruct.grammar.ir import Grammar, Literal, Repeat, RuleRef, Seq


def test_nullable_rules_fixpoint():
    g = Grammar(
        {
            "root": Seq((RuleRef("e2"), Literal("x"))),
            "e1": Literal(""),
            "e2": RuleRef("e1"),
            "opt": Repeat(Literal("a"), 0, 3),
            "plus": Repeat(RuleRef("e2"), 1, None),
            "solid": Repeat(Literal("a"), 1, None),
            "undef": RuleRef("nowhere"),
        }
    )
    assert nullable_rules(g) == {"e1", "e2", "opt", "plus"}


@pytest.mark.parametrize(
    "text, cycle",
    [
        ('root ::= "a" | root "a"', "root -> root"),
        ('root ::= asdf\nasdf ::= "a" | asdf "a"', "asdf -> asdf"),
        ('root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | asdf "d" | "e"', "asdf -> foo -> asdf"),
        # through a rule with an empty alternative (llama.cpp finds this one too)
        (
            'root ::= asdf\nasdf ::= "a" | foo "b"\nfoo ::= "c" | empty asdf "d" | "e"\nempty ::= "blah" |',
            "asdf -> foo -> asdf",
        ),
        # through nullable prefixes llama.cpp does not see: a nullable chain, x*, x?, "", x{0}
        ('root ::= e2 root "x" | "y"\ne2 ::= e1\ne1 ::= "q" |', "root -> root"),
        ('root ::= "a"* root | "b"', "root -> root"),
        ('root ::= ("a"? | "") b\nb ::= root "x" | "y"', "root -> b -> root"),
        ('root ::= "a"{0} root | "b"', "root -> root"),
        ('root ::= (root "x")* "y"', "root -> root"),
    ],
)
def test_left_recursion_is_rejected_with_its_cycle(text, cycle):
    with pytest.raises(GrammarError) as info:
        parse_gbnf(text)
    assert f"left recursion: {cycle} " in str(info.value)
    assert info.value.rule == cycle.split(" -> ")[0]


@pytest.mark.parametrize(
    "text",
    [
        'root ::= "a" root | "b"',  # right recursion
        'root ::= "(" root ")" | ""',
        'root ::= "a"{1} b\nb ::= root "x" | "y"',  # "a"{1} is not nullable
        'root ::= x root | "b"\nx ::= "k" | "l"',
    ],
)
def test_no_false_left_recursion(text):
    g = parse_gbnf(text)
    assert find_left_recursion(g) is None


def test_unreachable_rules_are_warnings_once():
    g = parse_gbnf('root ::= a\na ::= "x"\nb ::= c\nc ::= "y"')
    assert g.warnings == ["rule 'b' is unreachable from 'root'", "rule 'c' is unreachable from 'root'"]
    check_grammar(g)
    assert len(g.warnings) == 2


def test_left_recursion_in_unreachable_rule_is_still_an_error():
    # llama.cpp checks every rule, reachable or not
    with pytest.raises(GrammarError, match="left recursion: z -> z"):
        parse_gbnf('root ::= "a"\nz ::= z "b"')


def test_undefined_rule_names_rule_and_user():
    with pytest.raises(GrammarError) as info:
        check_grammar(Grammar({"root": Seq((Literal("a"), RuleRef("b")))}, source="s.gbnf"))
    assert str(info.value) == "s.gbnf: undefined rule 'b' (used in rule 'root')"
    assert info.value.rule == "root"


def test_missing_root_and_empty_grammar():
    with pytest.raises(GrammarError, match="no rule named 'start'"):
        check_grammar(Grammar({"root": Literal("a")}, root="start"))
    with pytest.raises(GrammarError, match="defines no rules"):
        check_grammar(Grammar({}))


def test_check_returns_the_same_grammar():
    g = Grammar({"root": Literal("a")})
    assert check_grammar(g) is g


def test_prune_unproductive_prunes_a_shared_expression_once_and_keeps_what_is_live():
    """A large expression many rules share is pruned once (one result object for all of
    them), a part without a dead reference comes back as it was, and the language is
    the same: the dead alternative goes, the rest stays."""
    from ministruct.engine.automaton import accepts
    from ministruct.grammar.analysis import productive_rules, prune_unproductive
    from ministruct.grammar.ir import alt, seq

    live = seq(Literal("a"), Repeat(Literal("b"), 0, None))
    shared = Repeat(alt(seq(Literal("x"), RuleRef("loop")), live), 1, 2)
    rules = {
        "root": seq(shared, RuleRef("r2")),
        "r2": seq(Literal("c"), shared),
        "loop": seq(Literal("y"), RuleRef("loop")),
    }
    assert productive_rules(rules) == {"root", "r2"}
    pruned = prune_unproductive(rules)
    assert set(pruned) == {"root", "r2"}
    assert pruned["root"].items[0] is pruned["r2"].items[1]  # pruned once, shared still
    assert pruned["root"].items[0].item is live  # (the live alternative itself, not a copy)
    g = Grammar(pruned, root="root")
    assert accepts(g, "abbaca") and not accepts(g, "xyca")
