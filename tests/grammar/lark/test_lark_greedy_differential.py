"""The greedy reading against llguidance itself, byte by byte: on random walks of the two
benchmark grammars and of random small grammars (their context-free reading's strings,
random bytes mixed in), "still viable" agrees at every byte and "accepting" at the end.

llguidance's verdicts are kept in greedy_verdicts.json (scripts/regen_lark_verdicts.py
writes it), so CI checks ministruct against them without llguidance; where llguidance is
installed, the table is checked against llguidance too."""

from __future__ import annotations

import json
from functools import cache
from pathlib import Path

import pytest

from ministruct.engine.automaton import Automaton
from ministruct.grammar.lark import parse_lark

TABLE = json.loads((Path(__file__).with_name("greedy_verdicts.json")).read_text(encoding="utf-8"))
GROUPS = TABLE["groups"]


@cache
def automaton(grammar: str, lexer: str = "greedy") -> Automaton:
    return Automaton(parse_lark(grammar, lexer=lexer))


def ours(grammar: str, text: str) -> tuple[int, bool]:
    """(bytes ministruct's greedy reading takes before refusing one, accepts the whole)."""
    a = automaton(grammar)
    config = a.initial
    data = text.encode()
    for i, b in enumerate(data):
        config = a.step(config, b)
        if not config:
            return i, False
    return len(data), a.is_accepting(config)


@pytest.mark.parametrize("group", GROUPS, ids=lambda g: g["name"])
def test_greedy_reading_agrees_with_llguidance_at_every_byte(group):
    wrong = []
    for v in group["verdicts"]:
        got = ours(group["grammar"], v["text"])
        if got != (v["viable"], v["accepting"]):
            wrong.append((v["text"], "ours", got, "llguidance", (v["viable"], v["accepting"])))
    assert wrong == []


def test_the_table_is_large_and_tells_the_readings_apart():
    strings = [(g["grammar"], v) for g in GROUPS for v in g["verdicts"]]
    n_bytes = sum(len(v["text"].encode()) for _, v in strings)
    assert len(GROUPS) >= 100 and len(strings) >= 1200 and n_bytes >= 30_000
    # the strings are the context-free reading's (noise aside): on enough of them the greedy
    # reading refuses a byte earlier, or the end, so the test tells the two readings apart
    differ = 0
    for grammar, v in strings:
        a = automaton(grammar, "cfl")
        config, data, viable = a.initial, v["text"].encode(), None
        for i, b in enumerate(data):
            config = a.step(config, b)
            if not config:
                viable = i
                break
        cfl = (len(data) if viable is None else viable, bool(config) and a.is_accepting(config))
        differ += cfl != (v["viable"], v["accepting"])
    assert differ >= 60


def test_the_table_is_llguidance_s():
    pytest.importorskip("llguidance")
    import sys

    sys.path.insert(0, str(Path(__file__).resolve().parents[3] / "scripts"))
    from regen_lark_verdicts import llguidance_verdict

    for g in GROUPS:
        for v in g["verdicts"]:
            assert llguidance_verdict(g["grammar"], v["text"]) == (v["viable"], v["accepting"]), (g["name"], v)


def test_the_gbnf_servers_get_holds_every_greedy_string():
    """What the fleet sends llama.cpp servers (export.with_gaps: no lexer) is a superset."""
    from ministruct.grammar.export import with_gaps

    for g in GROUPS[:40]:
        wide = Automaton(with_gaps(parse_lark(g["grammar"])))
        assert wide.grammar.lexer is None
        for v in g["verdicts"]:
            if v["accepting"]:
                assert wide.is_accepting(wide.step_bytes(wide.initial, v["text"].encode())), (g["name"], v)
