"""Token budgets (engine/budget.py): completion costs against a breadth-first oracle over
the automaton's own steps, and the narrowing laws on random grammars and budgets."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from oracles import bfs_cost  # tests/ is on sys.path (rootdir conftest)
from test_matcher import TOKENS, VOCAB, exprs

from ministruct.engine.budget import INF, budget_for
from ministruct.engine.compile import DEAD, compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, RuleRef, alt, seq

SETTINGS = settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.too_slow])
ONE_BYTE = sorted({t for t in TOKENS if len(t) == 1})
ALL_TOKENS = sorted({t for t in TOKENS if t})


@SETTINGS
@given(expr=exprs(), walk=st.lists(st.integers(0, 10_000), max_size=5))
def test_token_targets_agree_with_step_token(expr, walk):
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    for choice in walk + [None]:
        targets = compiled.token_targets(m.state)
        for tid in range(len(TOKENS)):
            assert targets[tid] == compiled.step_token(m.state, tid), (tid, TOKENS[tid])
        legal = [t for t in np.flatnonzero(m.mask()).tolist() if t != len(TOKENS)]
        if choice is None or not legal:
            break
        m.advance(legal[choice % len(legal)])


@SETTINGS
@given(expr=exprs(), walk=st.lists(st.integers(0, 10_000), max_size=5))
def test_completion_cost_lies_between_the_true_minimum_and_one_token_per_byte(expr, walk):
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    budget = budget_for(compiled)
    m = Matcher(compiled)
    for choice in walk + [None]:
        config = compiled.configs[m.state]
        fewest = bfs_cost(compiled.automaton, config, ALL_TOKENS, limit=40)
        one_byte = bfs_cost(compiled.automaton, config, ONE_BYTE, limit=40)
        got = budget.config_cost(m.state)
        if one_byte < INF:
            assert fewest <= got <= one_byte, (fewest, got, one_byte)
        else:
            assert got >= INF or fewest <= got
        legal = [t for t in np.flatnonzero(m.mask()).tolist() if t != len(TOKENS)]
        if choice is None or not legal:
            break
        m.advance(legal[choice % len(legal)])


@SETTINGS
@given(expr=exprs(), extra=st.integers(0, 6), walk=st.lists(st.integers(0, 10_000), min_size=1, max_size=40))
def test_budget_never_empty_while_a_completion_fits_and_always_completes(expr, extra, walk):
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    least = m.min_tokens_to_complete()
    if least is None:
        return
    budget = least + extra
    eog = len(TOKENS)
    for step in range(budget):
        remaining = budget - step
        mask = m.mask(remaining)
        assert mask.any(), (step, remaining)
        plain = m.mask()
        assert not (mask & ~plain).any()  # narrowing only removes
        if m.is_accepting():
            assert mask[eog]
        legal = np.flatnonzero(mask).tolist()
        tid = legal[walk[step % len(walk)] % len(legal)]
        if tid == eog:
            break
        m.advance(tid)
        assert m.min_tokens_to_complete() <= remaining - 1
    assert m.is_accepting()


def test_recursive_rules_cost_their_shortest_derivation():
    # value ::= "[" value "]" | "x";  root ::= value value
    g = Grammar(
        {
            "root": seq(RuleRef("value"), RuleRef("value")),
            "value": alt(seq(Literal("["), RuleRef("value"), Literal("]")), Literal("x")),
        }
    )
    compiled = compile_grammar(g, VOCAB, use_cache=False)
    m = Matcher(compiled)
    assert m.min_tokens_to_complete() == 2  # "xx"
    m.advance(TOKENS.index(b"x"))
    assert m.min_tokens_to_complete() == 1


def test_literals_count_as_the_tokens_that_spell_them():
    # "é" is one two-byte token: a literal stretch crossed in one step
    g = Grammar({"root": Literal("é")})
    assert Matcher(compile_grammar(g, VOCAB, use_cache=False)).min_tokens_to_complete() == 1
    # "a1b" + "ab" + "1": three tokens, not seven bytes
    g = Grammar({"root": Literal("a1bab1")})
    assert Matcher(compile_grammar(g, VOCAB, use_cache=False)).min_tokens_to_complete() == 3
    # no token spells "z": a grammar needing it cannot be completed
    g = Grammar({"root": Repeat(CharClass(((0x7A, 0x7A),)), 1, 1)})
    assert Matcher(compile_grammar(g, VOCAB, use_cache=False)).min_tokens_to_complete() is None


def test_narrowing_closes_a_long_repeat_in_time():
    # root ::= "a"{0,30} "b": with 3 tokens left after two "aa", only tokens that leave room for "b"
    g = Grammar({"root": seq(Repeat(Literal("a"), 0, 30), Literal("b"))})
    compiled = compile_grammar(g, VOCAB, use_cache=False)
    m = Matcher(compiled)
    assert m.min_tokens_to_complete() == 1
    mask = m.mask(1)
    assert [TOKENS[t] for t in np.flatnonzero(mask)] == [b"b", b"ab"]  # both finish in one token
    full = m.mask(2)
    assert {TOKENS[t] for t in np.flatnonzero(full)} == {b"a", b"b", b"aa", b"ab"}
    assert compiled.token_targets(m.state)[TOKENS.index(b"1")] == DEAD


def test_one_budget_rule_for_every_loop():
    """output_budget is the rule the decoder and the logits processor both keep: the
    shortest completion (and, where the loop spends one on it, end-of-generation) must fit."""
    from ministruct.engine.budget import output_budget
    from ministruct.errors import BudgetTooSmall, UsageError

    assert output_budget(3, 3) == 3  # ministruct's decoder stops at grammar_done
    assert output_budget(0, 0) == 0
    assert output_budget(3, 4, end_token=True) == 3  # llama-cpp-python spends one on EOS
    assert output_budget(None, 5) is None  # no bound to count: cut plainly
    with pytest.raises(BudgetTooSmall) as e:
        output_budget(3, 3, end_token=True)
    assert (e.value.max_tokens, e.value.least) == (3, 4)
    with pytest.raises(BudgetTooSmall):
        output_budget(4, 3)
    with pytest.raises(UsageError, match="max_tokens"):
        output_budget(1, -1)
