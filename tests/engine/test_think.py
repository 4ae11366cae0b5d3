"""Free text first, then the constraint: every mask equals a brute-force oracle.

The oracle runs each token's bytes through the combined language with plain string
logic (the thinking ends at the first CLOSE: `bytes.find`) and the `regex` package's
partial matching for the answer; it shares no code with the engine or with the
combinator. Vocabularies are small and hand-made, with adversarial tokens: CLOSE with
answer bytes after it, prefixes and suffixes of CLOSE, CLOSE inside a longer word, CLOSE
as one control token.
"""

from __future__ import annotations

import codecs

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import TokenRejected, UsageError
from ministruct.grammar.ir import TokenRef
from ministruct.grammar.regex import parse_regex
from ministruct.grammar.think import free_text_then

CLOSES = ["</t>", "abab", "aab", "ab", "x", "</think>", "é>"]
ANSWERS = [r'\{"a":[0-9]+\}', r"(yes|no)", r"[0-9]{1,3}", r"ab?"]
CONTROL = "<|end_think|>"


def _utf8_prefix(data: bytes) -> bool:
    """Can `data` begin a UTF-8 text (a truncated last character allowed)?"""
    try:
        codecs.getincrementaldecoder("utf-8")().decode(data, final=False)
    except UnicodeDecodeError:
        return False
    return True


def _complete_utf8(data: bytes) -> bool:
    try:
        data.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _answer_prefix(pattern: str, data: bytes, *, whole: bool = False) -> bool:
    """Is `data` a prefix (or with `whole`, a match) of the answer pattern? (The answers are ASCII.)"""
    try:
        text = data.decode("ascii")
    except UnicodeDecodeError:
        return False
    if whole:
        return regex.fullmatch(pattern, text) is not None
    return regex.fullmatch(pattern, text, partial=True) is not None


def _oracle_mask(
    vocab: Vocabulary,
    out: bytes,
    ids: list[int],
    close: bytes | None,
    close_id: int | None,
    pattern: str,
    may_end: bool,
    spent: bool,
) -> np.ndarray:
    """The legal tokens after output `out` (token ids `ids`), by brute force."""
    want = np.zeros(vocab.n_logits, dtype=bool)
    if close_id is not None:
        closed = close_id in ids
        answer = b"".join(vocab.tokens[t] for t in ids[ids.index(close_id) + 1 :]) if closed else None
    else:
        i = out.find(close)
        closed = i >= 0
        answer = out[i + len(close) :] if closed else None
    rest = b""
    if close is not None and not closed:
        k = max(k for k in range(len(close)) if out.endswith(close[:k]))
        rest = close[k:]
    for t, data in enumerate(vocab.tokens):
        if t in vocab.eog_ids:
            if closed:
                want[t] = _answer_prefix(pattern, answer, whole=True)
            else:
                want[t] = may_end and _utf8_prefix(out) and _complete_utf8(out)
            continue
        if t in vocab.control_ids:
            want[t] = t == close_id and not closed
            continue
        if closed:
            want[t] = _answer_prefix(pattern, answer + data)
            continue
        if close_id is not None:
            want[t] = not spent and _utf8_prefix(out + data)
            continue
        s = out + data
        j = s.find(close)
        if j < 0:
            ok = _utf8_prefix(s)
        else:
            # the free text before CLOSE is whole text: a character cut by CLOSE is not
            ok = _complete_utf8(s[:j]) and _answer_prefix(pattern, s[j + len(close) :])
        if spent:
            ok = ok and (rest.startswith(data) or data.startswith(rest))
        want[t] = ok
    return want


def _vocab(close: str | None, data) -> tuple[Vocabulary, int | None]:
    alphabet = sorted(set((close or "") + 'ab<>/tx{}":a0123456789yesnoé '))
    close_b = (close or "").encode()
    adversarial = []
    if close:
        adversarial += [close_b + b'{"', close_b + b"1", close_b + b"y", close_b + b"a", b"zz" + close_b + b"zz"]
        adversarial += [close_b[:k] for k in range(1, len(close_b))] + [close_b[k:] for k in range(1, len(close_b))]
        adversarial += [close_b[k:] + b"1" for k in range(1, len(close_b))] + [b"a" + close_b[:2]]
    singles = [c.encode() for c in alphabet]
    extra = data.draw(st.lists(st.text(alphabet, min_size=2, max_size=6), max_size=12), label="extra")
    toks = list(dict.fromkeys(singles + adversarial + [e.encode() for e in extra] + [b"zz"]))
    toks = [t for t in toks if t]
    n = len(toks)
    control = [n, n + 1]  # an unrelated control token, then end-of-generation
    toks += [b"", b""]
    text = {n: "<|other|>"}
    close_id = None
    if close is None:
        close_id = n + 2
        toks.append(b"")
        control.append(close_id)
        text[close_id] = CONTROL
    v = Vocabulary.from_bytes(toks, eog_ids=[n + 1], control_ids=control, control_text=text)
    return v, close_id


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(data=st.data())
def test_every_mask_equals_the_brute_force_oracle(data):
    close = data.draw(st.sampled_from(CLOSES + [None]), label="close")  # None: a control token
    pattern = data.draw(st.sampled_from(ANSWERS), label="answer")
    may_end = data.draw(st.booleans(), label="may_end")
    think = data.draw(st.one_of(st.none(), st.integers(0, 6)), label="think_tokens")
    vocab, close_id = _vocab(close, data)
    g = free_text_then(
        parse_regex(pattern), close=close if close is not None else TokenRef(name=CONTROL), may_end_in_free_text=may_end
    )
    m = Matcher(compile_grammar(g, vocab, use_cache=False), think_tokens=think)
    close_b = close.encode() if close is not None else None
    out, ids, n_think = b"", [], 0
    for _ in range(12):
        in_think = m.phase == "think"
        spent = in_think and think is not None and n_think >= think
        want = _oracle_mask(vocab, out, ids, close_b, close_id, pattern, may_end, spent)
        got = np.asarray(m.mask(), dtype=bool)
        diff = np.flatnonzero(got != want).tolist()
        assert not diff, (out, [(t, vocab.tokens[t], bool(got[t])) for t in diff])
        legal = [t for t in np.flatnonzero(want).tolist() if t not in vocab.eog_ids]
        if not legal:
            break
        t = data.draw(st.sampled_from(legal), label="token")
        m.advance(t)
        ids.append(t)
        out += vocab.tokens[t]
        n_think += in_think
        closed = (close_id in ids) if close_id is not None else (close_b in out)
        assert m.phase == ("answer" if closed else "think")


def _small(close: str | TokenRef = "</t>", *, think: int | None = None, may_end: bool = False, tokens=()):
    toks = [b"<", b"/", b"t", b">", b"</", b"</t>", b"</t>{", b"1", b"{", b"}", b"a", b"at</t>", b"hi", *tokens, b""]
    v = Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])
    g = free_text_then(parse_regex(r"\{1*\}"), close=close, may_end_in_free_text=may_end)
    return v, Matcher(compile_grammar(g, v, use_cache=False), think_tokens=think)


def _advance_text(v: Vocabulary, m: Matcher, *pieces: bytes) -> None:
    for p in pieces:
        m.advance(v.tokens.index(p))


def test_the_trigger_is_not_fed_to_the_grammar():
    """llama.cpp #22537: after CLOSE the free text is over, and CLOSE again belongs to no answer."""
    v, m = _small()
    _advance_text(v, m, b"hi", b"</t>")
    assert m.phase == "answer"
    assert not m.is_legal(v.tokens.index(b"</t>")) and not m.is_legal(v.tokens.index(b"<"))
    _advance_text(v, m, b"{", b"}")
    assert m.is_accepting()


def test_a_token_across_close_is_legal_exactly_when_its_answer_bytes_are():
    """llama.cpp #19503: `</t>{` crosses CLOSE into the answer; `at</t>` ends with it."""
    v, m = _small(tokens=[b"</t>}"])
    assert m.is_legal(v.tokens.index(b"</t>{")) and not m.is_legal(v.tokens.index(b"</t>}"))
    _advance_text(v, m, b"</t>{")
    assert m.phase == "answer" and m.phase_state.answer_start == 4
    _advance_text(v, m, b"}")
    assert m.is_accepting()


def test_close_inside_a_longer_word_ends_the_thinking():
    """llama.cpp #26787: CLOSE inside `at</t>` still ends the thinking at its last byte."""
    v, m = _small()
    _advance_text(v, m, b"at</t>")
    assert m.phase == "answer" and m.phase_state.answer_start == 6
    assert m.is_legal(v.tokens.index(b"{")) and not m.is_legal(v.tokens.index(b"a"))


def test_no_opening_needed_the_constraint_holds_anyway():
    """vLLM #57726: the output never writes OPEN (the prompt did, or nobody did): the
    answer is still constrained after CLOSE."""
    v = Vocabulary.from_bytes([b"<t>", b"x", b"</t>", b"{", b"}", b"1", b""], eog_ids=[6])
    g = free_text_then(parse_regex(r"\{1*\}"), close="</t>", open="<t>")
    for start in ([0, 1], [1]):  # with OPEN, without it
        m = Matcher(compile_grammar(g, v, use_cache=False))
        for t in start + [2]:
            m.advance(t)
        assert m.phase == "answer" and not m.is_legal(1) and m.is_legal(3)


def test_the_thinking_budget_forces_close_then_the_answer_fits():
    v, m = _small(think=2)
    _advance_text(v, m, b"hi", b"a")
    assert m.think_spent()
    legal = set(np.flatnonzero(m.mask()).tolist())
    assert legal == {v.tokens.index(p) for p in (b"<", b"</", b"</t>", b"</t>{")}
    assert m.forced_bytes() == b"</t>{"
    _advance_text(v, m, b"</")
    assert m.forced_bytes() == b"t>{"
    with pytest.raises(TokenRejected):
        m.advance(v.tokens.index(b"a"))
    _advance_text(v, m, b"t", b">")
    assert m.phase == "answer" and m.phase_state.think_end == "budget"


def test_a_closing_written_freely_is_closed():
    v, m = _small(think=5)
    _advance_text(v, m, b"hi", b"</t>")
    assert m.phase_state.think_end == "closed" and m.phase_state.think_tokens == 2


def test_control_token_close_is_the_only_way_out_once_spent():
    toks = [b"a", b"b", b"{", b"}", b"", b""]
    v = Vocabulary.from_bytes(toks, eog_ids=[5], control_ids=[4], control_text={4: CONTROL})
    g = free_text_then(parse_regex(r"\{\}"), close=TokenRef(name=CONTROL))
    m = Matcher(compile_grammar(g, v, use_cache=False), think_tokens=1)
    assert np.flatnonzero(m.mask()).tolist() == [0, 1, 2, 3, 4]  # any text, or CLOSE
    m.advance(0)
    assert np.flatnonzero(m.mask()).tolist() == [4]
    m.advance(4)
    assert m.phase == "answer" and m.phase_state.answer_start == 1
    assert np.flatnonzero(m.mask()).tolist() == [2]


def test_rollback_and_fork_keep_the_phase():
    v, m = _small()
    _advance_text(v, m, b"hi", b"</t>")
    f = m.fork()
    m.rollback(1)
    assert m.phase == "think" and f.phase == "answer"


def test_think_tokens_needs_a_free_text_grammar():
    v = Vocabulary.from_bytes([b"a", b""], eog_ids=[1])
    with pytest.raises(UsageError, match="think_tokens"):
        Matcher(compile_grammar(parse_regex("a"), v, use_cache=False), think_tokens=3)
