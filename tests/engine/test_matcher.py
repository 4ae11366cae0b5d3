"""Matcher laws and exactness on small hand-made vocabularies.

The oracle is the `regex` package's partial matching on bytes patterns, built here
from a random IR by a translator that shares no code with the engine.
"""

from __future__ import annotations

import re

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, reject, settings
from hypothesis import strategies as st

from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher, TokenRejected
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import GrammarError, UsageError
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, RuleRef, Seq, TokenRef, alt, seq

DIGIT = CharClass(((0x30, 0x39),))


def vocab_of(*tokens: bytes, eog: bool = True) -> Vocabulary:
    toks = list(tokens) + ([b""] if eog else [])
    return Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1] if eog else [])


def legal_ids(m: Matcher) -> list[int]:
    return np.nonzero(m.mask())[0].tolist()


# ------------------------------------------------------------------ basics


def test_four_digits_multi_digit_tokens_then_only_eog():
    v = vocab_of(b"1", b"12", b"123", b"1234", b"12345", b"a", b"9", b"x1")
    eog = v.n_tokens - 1
    m = Matcher(compile_grammar(Grammar({"root": Repeat(DIGIT, 4, 4)}), v))
    assert legal_ids(m) == [0, 1, 2, 3, 6]
    m.advance(2)  # "123"
    assert legal_ids(m) == [0, 6]
    m.advance(6)
    assert legal_ids(m) == [eog]
    assert m.is_accepting() and m.is_terminated()


def test_reset_starts_from_the_beginning():
    v = vocab_of(b"ab", b"a", b"b")
    m = Matcher(compile_grammar(Grammar({"root": Literal("ab")}), v))
    first = legal_ids(m)
    m.advance(1)
    assert legal_ids(m) == [2]
    m.reset()
    assert legal_ids(m) == first


def test_empty_and_duplicate_tokens():
    v = vocab_of(b"", b"a", b"a", b"aa")
    m = Matcher(compile_grammar(Grammar({"root": Repeat(Literal("a"), 1, 2)}), v))
    # empty tokens are never legal: they cannot advance the output
    assert legal_ids(m) == [1, 2, 3]
    m.advance(2)
    assert legal_ids(m) == [1, 2, 4]


def test_multibyte_character_split_across_tokens():
    v = vocab_of(b"\xc3", b"\xa9", b"\xc3\xa9", b"e", b"\xa8")
    m = Matcher(compile_grammar(Grammar({"root": Repeat(CharClass(((0xE9, 0xE9),)), 1, None)}), v))
    assert legal_ids(m) == [0, 2]
    m.advance(0)
    assert legal_ids(m) == [1]
    m.advance(1)
    assert set(legal_ids(m)) == {0, 2, v.n_tokens - 1}


def test_control_tokens_never_legal_unless_named():
    toks = [b"a", b"", b""]
    v = Vocabulary.from_bytes(toks, eog_ids=[2], control_ids=[1], control_text={1: "<|x|>", 2: "<|end|>"})
    any_char = Repeat(CharClass((), negated=True), 0, None)
    m = Matcher(compile_grammar(Grammar({"root": any_char}), v))
    assert legal_ids(m) == [0, 2]
    named = Grammar({"root": seq(Literal("a"), TokenRef(name="<|x|>"))})
    m = Matcher(compile_grammar(named, v))
    m.advance(0)
    assert legal_ids(m) == [1]
    m.advance(1)
    assert legal_ids(m) == [2]


def test_token_id_and_negated_token():
    v = vocab_of(b"a", b"b", b"c")
    g = Grammar({"root": seq(TokenRef(token_id=1), TokenRef(token_id=1, negated=True))})
    m = Matcher(compile_grammar(g, v))
    assert legal_ids(m) == [1]
    m.advance(1)
    assert legal_ids(m) == [0, 2]
    m.advance(2)
    assert legal_ids(m) == [v.n_tokens - 1]


def test_padded_logits_rows_never_legal():
    v = Vocabulary.from_bytes([b"a", b""], eog_ids=[1], n_logits=8)
    m = Matcher(compile_grammar(Grammar({"root": Repeat(Literal("a"), 0, None)}), v))
    mask = m.mask()
    assert mask.shape == (8,) and not mask[2:].any()


def test_advance_rejects_illegal_and_rollback_fork():
    v = vocab_of(b"1", b"a")
    m = Matcher(compile_grammar(Grammar({"root": Repeat(DIGIT, 2, 2)}), v))
    with pytest.raises(TokenRejected):
        m.advance(1)
    with pytest.raises(TokenRejected):
        m.advance(v.n_tokens - 1)  # eog before complete
    assert m.is_legal(0) and not m.is_legal(1) and not m.is_legal(v.n_tokens - 1)
    m.advance(0)
    f = m.fork()
    f.advance(0)
    assert f.is_accepting() and not m.is_accepting()
    f.rollback(1)
    assert legal_ids(f) == legal_ids(m) == [0]
    f.advance(0)
    f.advance(v.n_tokens - 1)
    assert legal_ids(f) == []
    f.rollback(2)
    assert legal_ids(f) == [0]


def test_recursive_grammar_deep_nesting_stays_exact():
    v = vocab_of(b"[", b"]", b"[[", b"]]", b"1", b",")
    value = alt(
        seq(
            Literal("["),
            Repeat(seq(RuleRef("v"), Repeat(seq(Literal(","), RuleRef("v")), 0, None)), 0, 1),
            Literal("]"),
        ),
        DIGIT,
    )
    m = Matcher(compile_grammar(Grammar({"root": RuleRef("v"), "v": value}), v))
    for _ in range(200):
        m.advance(2)
    for _ in range(200):
        assert 3 in legal_ids(m) or m.compiled.is_accepting(m.state)
        m.advance(3)
    assert m.is_accepting()


def test_left_recursion_is_an_error_not_a_hang():
    g = Grammar({"root": alt(seq(RuleRef("root"), Literal("a")), Literal("b"))})
    with pytest.raises(GrammarError):
        compile_grammar(g, vocab_of(b"a"))


# ------------------------------------------------------------------ property: exact vs `regex`


def to_bytes_regex(e) -> bytes:
    """Translate an ASCII-class IR (no rules) to a bytes regex, independently of the engine."""
    if isinstance(e, Literal):
        return b"(?:" + re.escape(e.text.encode()) + b")"
    if isinstance(e, CharClass):
        body = b"".join(re.escape(bytes([a])) + (b"-" + re.escape(bytes([b])) if b != a else b"") for a, b in e.ranges)
        if e.negated:
            # negated over code points: any other character, as its UTF-8 bytes
            ascii_part = b"[^" + body + b"\x80-\xff]" if body else b"[\x00-\x7f]"
            return (
                b"(?:"
                + ascii_part
                + b"|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf]|[\xe1-\xec\xee\xef][\x80-\xbf]{2}|\xed[\x80-\x9f][\x80-\xbf]|\xf0[\x90-\xbf][\x80-\xbf]{2}|[\xf1-\xf3][\x80-\xbf]{3}|\xf4[\x80-\x8f][\x80-\xbf]{2})"
            )
        return b"[" + body + b"]"
    if isinstance(e, Seq):
        return b"(?:" + b"".join(to_bytes_regex(x) for x in e.items) + b")"
    if isinstance(e, Alt):
        return b"(?:" + b"|".join(to_bytes_regex(x) for x in e.options) + b")"
    if isinstance(e, Repeat):
        hi = b"" if e.max is None else str(e.max).encode()
        return b"(?:" + to_bytes_regex(e.item) + b"){" + str(e.min).encode() + b"," + hi + b"}"
    raise TypeError(e)


ALPHABET = "ab1é"
literals = st.text(alphabet=ALPHABET, min_size=0, max_size=3).map(Literal)
classes = st.sampled_from(
    [
        CharClass(((0x61, 0x62),)),
        CharClass(((0x31, 0x31),)),
        CharClass(((0x61, 0x61),), negated=True),
    ]
)


def exprs():
    return st.recursive(
        literals | classes,
        lambda inner: st.one_of(
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Seq(tuple(xs))),
            st.lists(inner, min_size=2, max_size=3).map(lambda xs: Alt(tuple(xs))),
            st.tuples(inner, st.integers(0, 2), st.integers(0, 2) | st.none()).map(
                lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2])
            ),
        ),
        max_leaves=6,
    )


TOKENS = [b"a", b"b", b"1", b"ab", b"ba", b"aa", b"11", b"a1b", "é".encode(), b"\xc3", b"\xa9", b"b\xc3", b"x", b""]
VOCAB = Vocabulary.from_bytes(TOKENS + [b""], eog_ids=[len(TOKENS)])


@settings(
    max_examples=int(__import__("os").environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(expr=exprs(), walk=st.lists(st.integers(0, 10_000), max_size=6))
def test_mask_equals_partial_match_oracle(expr, walk):
    pattern = regex.compile(to_bytes_regex(expr), flags=regex.DOTALL)
    m = Matcher(compile_grammar(Grammar({"root": expr}), VOCAB))
    out = b""
    for choice in walk + [None]:
        mask = m.mask()
        for tid, tok in enumerate(TOKENS):
            try:
                want = bool(tok) and pattern.fullmatch(out + tok, partial=True, timeout=2.0) is not None
            except TimeoutError:
                reject()  # the oracle backtracks exponentially on this pattern: not a verdict
            assert mask[tid] == want, (out, tok)
        assert mask[len(TOKENS)] == (pattern.fullmatch(out, timeout=2.0) is not None)
        legal = [t for t in np.nonzero(mask)[0].tolist() if t != len(TOKENS)]
        if choice is None or not legal:
            break
        tid = legal[choice % len(legal)]
        m.advance(tid)
        out += TOKENS[tid]


def test_nested_repeat_simplification_keeps_the_minimum():
    # (1+){2,} needs at least two ones; (1*){2,3} is 1*
    v = vocab_of(b"1")
    m = Matcher(compile_grammar(Grammar({"root": Repeat(Repeat(Literal("1"), 1, None), 2, None)}), v))
    m.advance(0)
    assert not m.is_accepting()
    m.advance(0)
    assert m.is_accepting()
    star = Matcher(compile_grammar(Grammar({"root": Repeat(Repeat(Literal("1"), 0, None), 2, 3)}), v))
    assert star.is_accepting()


long_repeats = st.tuples(
    # simple items only: nested quantifiers make the `regex` oracle backtrack for minutes
    st.one_of(literals.filter(lambda x: x.text != ""), classes),
    st.integers(0, 12),
    st.integers(0, 12) | st.none(),
).map(lambda t: Repeat(t[0], t[1], None if t[2] is None else t[1] + t[2]))


@settings(
    max_examples=int(__import__("os").environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", "150")),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(rep=long_repeats, tail=literals, walk=st.lists(st.integers(0, 10_000), min_size=5, max_size=25))
def test_long_repeats_share_masks_exactly(rep, tail, walk):
    """Copies far from a repeat's bounds share one mask; it must stay exact near the bounds."""
    expr = Seq((rep, tail))
    test_mask_equals_partial_match_oracle.hypothesis.inner_test(expr, walk)


def test_a_walk_inside_a_long_repeat_stays_in_one_copy(unbounded_warm):
    """Inside a token, a configuration in a repeat copy far from the bounds continues as
    its image in the first such copy: the first mask of a 200-copy repeat makes a few
    configurations, not some for every byte of the longest token. Masks stay exact up to
    and past the bound."""
    toks = [b"a", b"b", b"ab", b"aba", b"abab", b"ababab", b"ba", b"!", b"ab!", b"ab" * 6, b"b" * 12]
    v = vocab_of(*toks)
    g = Grammar({"root": Seq((Repeat(alt(Literal("ab"), Literal("b")), 0, 200), Literal("!")))})
    compiled = compile_grammar(g, v, use_cache=False, warm=True)
    before = len(compiled.configs)
    compiled.mask(compiled.initial)
    assert len(compiled.configs) - before <= 4
    pattern = regex.compile(rb"(?:ab|b){0,200}!")
    m, out = Matcher(compiled), b""
    for step in range(120):
        mask = m.mask()
        for tid, tok in enumerate(toks):
            assert mask[tid] == (pattern.fullmatch(out + tok, partial=True) is not None), (len(out), tok)
        legal = [t for t in np.nonzero(mask[: len(toks)])[0].tolist() if b"!" not in toks[t]]
        if not legal:
            break
        tid = legal[-1] if step % 3 else legal[0]  # mostly the longest tokens: run into the bound
        m.advance(tid)
        out += toks[tid]
    assert out.count(b"b") == 200  # the walk reached the bound


def test_masks_cut_from_chunks_stay_exact_and_apart(monkeypatch):
    """Masks cut from shared chunks (compile.MASK_CHUNK_BYTES) equal the regex oracle's
    legal sets, and writing later masks leaves the earlier ones as they were."""
    from ministruct.engine import compile as compile_module

    monkeypatch.setattr(compile_module, "MASK_CHUNK_BYTES", 4 * VOCAB.n_logits)
    expr = Seq(
        (Repeat(Alt((Literal("ab"), Literal("1"))), 1, None), Literal("x"), Repeat(CharClass(((0x61, 0x62),)), 0, 3))
    )
    pattern = regex.compile(to_bytes_regex(expr), flags=regex.DOTALL)
    m = Matcher(compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False))
    out, kept = b"", []
    for step in range(12):
        mask = m.mask()
        assert mask.base is not None and not mask.flags.writeable  # (a row of a chunk)
        want = [bool(tok) and pattern.fullmatch(out + tok, partial=True) is not None for tok in TOKENS]
        assert mask[: len(TOKENS)].tolist() == want, out
        kept.append((mask, mask.copy()))
        legal = [t for t in np.nonzero(mask)[0].tolist() if t != len(TOKENS)]
        if not legal:
            break
        tid = legal[(7 * step + 3) % len(legal)]
        m.advance(tid)
        out += TOKENS[tid]
    assert len({id(mask.base) for mask, _ in kept}) > 1  # more masks than one chunk holds
    for mask, then in kept:
        assert np.array_equal(mask, then)


def test_rollback_and_mask_arguments_out_of_range_are_usage_errors():
    # rollback raised a plain ValueError (not a MinistructError); mask(remaining=-1) answered "nothing is legal"
    m = Matcher(compile_grammar(Grammar({"root": Repeat(DIGIT, 2, 2)}), vocab_of(b"1")))
    for n in (-1, 1):
        with pytest.raises(UsageError, match=f"cannot roll back {n} of 0 tokens") as e:
            m.rollback(n)
        assert e.value.parameter == "n"
    with pytest.raises(UsageError, match="remaining must be >= 0") as e:
        m.mask(remaining=-1)
    assert e.value.parameter == "remaining"


@pytest.mark.parametrize("vocab", [None, [b"a", b"b"]])
def test_compile_grammar_without_a_vocabulary_is_a_usage_error(vocab):
    # was: AttributeError: 'NoneType' object has no attribute 'fingerprint'
    with pytest.raises(UsageError, match="vocab must be a Vocabulary") as e:
        compile_grammar(Grammar({"root": DIGIT}), vocab)
    assert e.value.parameter == "vocab"
