"""Forced bytes (engine/forced.py): the stretch the grammar dictates, against the `regex`
package's partial matching (an oracle that shares no code with the engine)."""

from __future__ import annotations

import numpy as np
import regex
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st
from test_matcher import TOKENS, VOCAB, exprs, to_bytes_regex

from ministruct.engine.compile import compile_grammar
from ministruct.engine.forced import ForcedBytes, forced_bytes, forced_for
from ministruct.engine.matcher import Matcher
from ministruct.grammar.ir import CharClass, Grammar, Literal, Repeat, RuleRef, TokenRef, alt, seq

DIGIT = CharClass(((0x30, 0x39),))


def forced_of(expr, rules=None) -> bytes:
    g = Grammar({"root": expr, **(rules or {})})
    return Matcher(compile_grammar(g, VOCAB, use_cache=False)).forced_bytes()


def test_hand_cases():
    assert forced_of(Literal("hello")) == b"hello"
    assert forced_of(seq(Literal('{"age":'), DIGIT)) == b'{"age":'
    assert forced_of(alt(Literal("ab"), Literal("ac"))) == b"a"  # then a choice
    assert forced_of(DIGIT) == b""
    # the output may end after "ab": stop there even though only "c" could continue it
    assert forced_of(seq(Literal("ab"), Repeat(Literal("cd"), 0, 1))) == b"ab"
    # through rule calls, and a multi-byte character
    assert forced_of(seq(RuleRef("q"), Literal("é"), RuleRef("q"), DIGIT), {"q": Literal('"')}) == '"é"'.encode()


def test_a_token_edge_ends_the_stretch():
    assert forced_of(seq(Literal("ab"), TokenRef(token_id=1), Literal("cd"))) == b"ab"
    # one byte could come next, but so could a whole token: not dictated
    assert forced_of(seq(Literal("ab"), alt(TokenRef(token_id=1), Literal("cd")))) == b"ab"


def test_follows_the_matcher_and_caches_per_configuration():
    compiled = compile_grammar(Grammar({"root": seq(Literal("abab"), DIGIT, Literal("xy"))}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    assert m.forced_bytes() == b"abab"
    m.advance(TOKENS.index(b"ab"))
    assert m.forced_bytes() == b"ab"
    m.advance(TOKENS.index(b"ab"))
    assert m.forced_bytes() == b""  # a digit: the model's choice
    # the cache is the one ForcedBytes of this CompiledGrammar
    assert forced_for(compiled) is forced_for(compiled)
    assert forced_bytes(compiled, compiled.initial) == b"abab"
    m.reset()
    assert m.forced_bytes() == b"abab"


def test_the_length_is_bounded():
    compiled = compile_grammar(Grammar({"root": Literal("ab" * 20)}), VOCAB, use_cache=False)
    assert ForcedBytes(compiled, limit=7).forced(compiled.initial) == b"abababa"
    assert forced_bytes(compiled, compiled.initial) == b"ab" * 20


def test_nothing_after_the_end_of_generation():
    v_eog = len(TOKENS)
    m = Matcher(compile_grammar(Grammar({"root": Literal("ab")}), VOCAB, use_cache=False))
    m.advance(TOKENS.index(b"ab"))
    m.advance(v_eog)
    assert m.forced_bytes() == b""


ORACLE_LIMIT = 24  # bytes the oracle follows at most (256 partial matches each)


def oracle_forced(pattern, out: bytes, limit: int = ORACLE_LIMIT) -> bytes:
    """Follow while the output is not complete and exactly one byte keeps it a prefix."""
    forced = b""
    while len(forced) < limit:
        text = out + forced
        if pattern.fullmatch(text, timeout=2.0) is not None:
            break
        nxt = [b for b in range(256) if pattern.fullmatch(text + bytes([b]), partial=True, timeout=2.0)]
        if len(nxt) != 1:
            break
        forced += bytes(nxt)
    return forced


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=exprs(), walk=st.lists(st.integers(0, 10_000), max_size=5))
def test_forced_bytes_equal_the_oracle(expr, walk):
    pattern = regex.compile(to_bytes_regex(expr), flags=regex.DOTALL)
    m = Matcher(compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False))
    out = b""
    for choice in walk + [None]:
        try:
            want = oracle_forced(pattern, out)
        except TimeoutError:
            reject()
        got = m.forced_bytes()
        if len(want) == ORACLE_LIMIT:  # the oracle stopped following: ours may go on
            got = got[:ORACLE_LIMIT]
        assert got == want, out
        legal = [t for t in np.flatnonzero(m.mask()).tolist() if t != len(TOKENS)]
        if choice is None or not legal:
            break
        tid = legal[choice % len(legal)]
        m.advance(tid)
        out += TOKENS[tid]
