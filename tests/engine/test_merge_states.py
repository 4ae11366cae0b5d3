"""Alike automaton states merged (engine/merge_states.py, greedy Lark automata): contexts
that differ only in alike return points are one configuration, and the language is the
automaton's without merging, byte by byte, on both benchmark grammars and the small
greedy grammars of test_greedy.py (the llguidance verdict table checks it against the
peer too: tests/grammar/lark/test_lark_greedy_differential.py)."""

from __future__ import annotations

import random

import pytest
from test_greedy import SMALL  # tests/engine is on sys.path (rootdir conftest)

from ministruct.engine import automaton as automaton_module
from ministruct.engine.automaton import Automaton
from ministruct.grammar.constraint import Constraint

OR_CHAIN = 'start: t ("or" t)*\nt: NAME | "(" start ")"\nNAME: /[a-z]+/\n%ignore " "\n'


def _pair(text: str, monkeypatch: pytest.MonkeyPatch) -> tuple[Automaton, Automaton]:
    """The automaton of a Lark text with alike states merged, and without."""
    grammar = Constraint.from_lark(text).grammar
    merged = Automaton(grammar)
    with monkeypatch.context() as m:
        m.setattr(automaton_module, "merge_equivalent_states", lambda a: 0)
        plain = Automaton(grammar)
    return merged, plain


def test_alike_return_points_are_one_configuration(monkeypatch):
    merged, plain = _pair(OR_CHAIN, monkeypatch)
    # after the first operand and after a later one, the rest of the text may be the same
    for a in (merged, plain):
        first, later = a.step_bytes(a.initial, b"(x"), a.step_bytes(a.initial, b"(y or x")
        assert first and later
        assert (first == later) == (a is merged)


@pytest.mark.parametrize("name", sorted(SMALL) + ["or-chain"])
def test_merging_keeps_the_language_byte_by_byte(name, monkeypatch):
    """Random texts (walks of the merged automaton with random bytes mixed in): 'still
    viable' agrees at every byte and 'accepting' wherever both are viable."""
    merged, plain = _pair(OR_CHAIN if name == "or-chain" else SMALL[name], monkeypatch)
    rng = random.Random(name)
    alphabet = sorted({b for lo, hi, _ in (e for es in plain.byte_edges for e in es) for b in range(lo, hi + 1)})
    alphabet = [b for b in alphabet if b < 128] + [ord(" "), ord("!")]
    checked = 0
    for _ in range(60):
        x, y = merged.initial, plain.initial
        for _ in range(rng.randrange(1, 40)):
            options = [b for b in alphabet if merged.step(x, b)] if rng.random() < 0.85 else alphabet
            b = rng.choice(options or alphabet)
            x, y = merged.step(x, b), plain.step(y, b)
            assert bool(x) == bool(y), (name, b)
            if not x:
                break
            assert merged.is_accepting(x) == plain.is_accepting(y)
            checked += 1
    assert checked > 200
