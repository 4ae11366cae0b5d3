"""Vocabulary slices (engine/slices.py): masks stay exact where slice tokens are taken by length.

Strings of character classes, bounded and unbounded, over a vocabulary of multi-character
tokens in ASCII, Latin, Greek, CJK and astral characters (plus tokens that are pieces of a
character), against the `regex` package's partial matching on bytes. The oracle spells a
class as the alternation of the UTF-8 encodings of the alphabet's characters it contains:
every token is made of alphabet characters (or pieces of one), so that is exact.
"""

from __future__ import annotations

import random

import numpy as np
import pytest
import regex
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.engine import compile as compile_module
from ministruct.engine import mask_walks
from ministruct.engine.chains import _UNASKED, FULL
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.slices import MAX_SLICE_CHARS, NOT_IN, index_for
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, RuleRef, Seq

ALPHABET = list('abcdxyz0159"\\ -\n') + ["é", "ü", "ñ", "α", "ω", "中", "𝄞"]


def vocabulary() -> tuple[list[bytes], Vocabulary]:
    rng = random.Random(11)
    toks = {c.encode() for c in ALPHABET}
    while len(toks) < 250:
        toks.add("".join(rng.choice(ALPHABET) for _ in range(rng.randint(2, 7))).encode())
    for c in ("é", "中", "𝄞"):  # pieces of characters
        b = c.encode()
        toks.update({b[:1], b[1:], b"a" + b[:-1]})
    ordered = sorted(toks)
    return ordered, Vocabulary.from_bytes(ordered + [b""], eog_ids=[len(ordered)])


TOKENS, VOCAB = vocabulary()


@pytest.fixture(autouse=True)
def prune_small_subtrees(monkeypatch):
    """The walk asks whether a slice decides a node only above 2048 tokens; this vocabulary
    is small, so lower the bar to have every node asked."""
    monkeypatch.setattr(mask_walks, "PRUNE_MIN_TOKENS", 1)
    monkeypatch.setattr(mask_walks, "OPEN_MIN_TOKENS", 1)  # (open chains too,
    monkeypatch.setattr(mask_walks, "OPEN_TOKENS_PER_LEAVER", 0)  # however many leave them,
    monkeypatch.setattr(mask_walks, "OPEN_BUILD_S_PER_TOKEN", 0)  # from their first walk)


EOG = len(TOKENS)


def char_class(chars: list[str], negated: bool) -> CharClass:
    if negated:  # exclude ASCII only: a piece of a character is then legal exactly when the
        # alphabet has a character starting with it (the oracle knows only the alphabet)
        chars = [c for c in chars if c.isascii()]
    return CharClass(tuple((ord(c), ord(c)) for c in sorted(set(chars))), negated=negated)


def oracle_class(c: CharClass) -> bytes:
    inside = {ch for ch in ALPHABET if any(a <= ord(ch) <= b for a, b in c.ranges)}
    if c.negated:
        inside = set(ALPHABET) - inside
        other = b"|[\xc2-\xdf][\x80-\xbf]|[\xe0-\xef][\x80-\xbf]{2}|[\xf0-\xf4][\x80-\xbf]{3}"
        return b"(?:" + b"|".join(regex.escape(ch.encode()) for ch in sorted(inside)) + other + b")"
    if not inside:
        return b"(?!)"
    return b"(?:" + b"|".join(regex.escape(ch.encode()) for ch in sorted(inside)) + b")"


def oracle(e) -> bytes:
    if isinstance(e, Literal):
        return regex.escape(e.text.encode())
    if isinstance(e, CharClass):
        return oracle_class(e)
    if isinstance(e, Seq):
        return b"(?:" + b"".join(oracle(x) for x in e.items) + b")"
    if isinstance(e, Alt):
        return b"(?:" + b"|".join(oracle(x) for x in e.options) + b")"
    if isinstance(e, Repeat):
        hi = b"" if e.max is None else str(e.max).encode()
        return b"(?:" + oracle(e.item) + b"){" + str(e.min).encode() + b"," + hi + b"}"
    raise TypeError(e)


classes = st.builds(
    char_class,
    st.lists(st.sampled_from(ALPHABET), min_size=1, max_size=len(ALPHABET)),
    st.booleans(),
)
repeats = st.builds(
    lambda c, m, extra: Repeat(c, m, None if extra is None else m + extra),
    classes,
    st.integers(0, 3),
    st.none() | st.integers(0, 12),
)
# JSON-like strings: [^"\\] with or without control characters, after a literal prefix
# (walks from before the quote reach configurations the slice decides for good)
body = st.sampled_from(
    [
        CharClass(((0x22, 0x22), (0x5C, 0x5C)), negated=True),
        CharClass(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)), negated=True),
        CharClass(((0x22, 0x22),), negated=True),
    ]
)
open_strings = st.builds(
    lambda b, lead, tail: Seq((Literal(lead + '"'), Repeat(b, 0, None), Literal('"' + tail))),
    body,
    st.sampled_from(["", "a", "-", "é"]),
    st.sampled_from(["", "x", " "]),
) | st.builds(
    lambda b, word: Alt((Literal('"' + word + '"'), Seq((Literal('"'), Repeat(b, 1, None), Literal('"'))))),
    body,
    st.sampled_from(["ab", "é", "a-"]),
)
strings = open_strings | st.one_of(
    repeats.map(lambda r: Seq((Literal('"'), r, Literal('"')))),
    st.tuples(repeats, repeats).map(lambda rs: Seq((rs[0], Literal("-"), rs[1]))),
    st.tuples(repeats, repeats).map(lambda rs: Alt((Seq((rs[0], Literal(" "))), Seq((rs[1], Literal("ü")))))),
    st.tuples(repeats, st.sampled_from(["a", "é", "中"])).map(lambda t: Repeat(Seq((t[0], Literal(t[1]))), 0, 3)),
)


def assert_mask_is_oracles(mask: np.ndarray, pattern: regex.Pattern, out: bytes) -> None:
    """Every token legal after `out` exactly when the pattern partially matches with it,
    end-of-generation exactly when `out` matches whole."""
    want = np.asarray([pattern.fullmatch(out + t, partial=True) is not None for t in TOKENS] + [False])
    want[EOG] = pattern.fullmatch(out) is not None
    assert (mask == want).all(), (
        out,
        [TOKENS[i] for i in np.flatnonzero(mask & ~want) if i < EOG],
        [TOKENS[i] for i in np.flatnonzero(want & ~mask) if i < EOG],
    )


@settings(max_examples=50, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=strings, walk=st.lists(st.integers(0, 10_000), max_size=6))
def test_masks_with_slices_equal_partial_matching(expr, walk):
    pattern = regex.compile(oracle(expr), flags=regex.DOTALL)
    m = Matcher(compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False))
    out = b""
    for choice in walk + [None]:
        mask = m.mask()
        assert_mask_is_oracles(mask, pattern, out)
        legal = [t for t in np.flatnonzero(mask).tolist() if t != EOG]
        if choice is None or not legal:
            break
        t = legal[choice % len(legal)]
        m.advance(t)
        out += TOKENS[t]


def assert_cells_are_steps(compiled) -> None:
    """Every known cell of the table (chain steps write some: SliceChains._write_cells)
    is the automaton's own step of its configuration on a byte of its class."""
    tr, step = compiled.transitions, compiled.automaton.step
    known = np.argwhere(tr.table[1 : len(tr)] != -1)
    assert len(known)
    for row, cls in known.tolist():
        cid = row + 1
        want = step(tr.configs[cid], int(tr.class_rep[cls]))
        assert tr.configs[int(tr.table[cid, cls])] == want, (tr.configs[cid], cls)


def walk_against_oracle(m: Matcher, pattern: regex.Pattern, walk: list[int], long_every: int) -> None:
    """Each mask along the walk is the oracle's; the walk takes one of the three longest
    legal tokens, but for every `long_every`-th choice any legal token."""
    out = b""
    for choice in walk + [None]:
        mask = m.mask()
        assert_mask_is_oracles(mask, pattern, out)
        legal = sorted((t for t in np.flatnonzero(mask).tolist() if t != EOG), key=lambda t: len(TOKENS[t]))
        if choice is None or not legal:
            break
        t = legal[-1 - choice % min(3, len(legal))] if choice % long_every else legal[choice % len(legal)]
        m.advance(t)
        out += TOKENS[t]


OPEN_CLASS = CharClass(tuple((ord(c), ord(c)) for c in "abcdxyz0159-"), negated=False)
# letters and more: its chains walk the tokens not made of letters alone
WORD_CLASS = CharClass(((0x2D, 0x2D), (0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)), negated=False)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    cls=st.sampled_from([OPEN_CLASS, WORD_CLASS]),
    bounds=st.sampled_from([(1, 3), (1, 12), (2, 30), (0, None), (3, None)]),
    walk=st.lists(st.integers(0, 10_000), min_size=4, max_size=20),
)
def test_open_chains_equal_partial_matching(cls, bounds, walk):
    """Characters that leave a counted class for elsewhere (an e-mail's '.' and '@') do
    not keep the other characters from being taken by length: the masks stay exact."""
    lo, hi = bounds
    part = Repeat(cls, lo, hi)
    expr = Seq((Literal('"'), part, Repeat(Seq((Literal("."), part)), 0, 2), Literal("é"), part, Literal('"')))
    pattern = regex.compile(oracle(expr), flags=regex.DOTALL)
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    walk_against_oracle(m, pattern, walk, long_every=2)
    assert compiled._chains_of("json-char")._alive_sets  # (the open chains were asked)


def test_open_chains_take_the_class_tokens_by_length():
    """Inside a counted class that '.' leaves, the class's tokens are taken by length and
    only the other tokens are walked."""
    part = Repeat(OPEN_CLASS, 1, 12)
    expr = Seq((Literal('"'), part, Literal("."), part, Literal('"')))
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    cid = compiled.step_bytes(compiled.initial, b'"ab')
    members, trie = compiled._slice_for(compiled._split(cid)[1])
    assert members is not None
    if isinstance(members, tuple):  # (lengths, limit): at most `limit` characters
        members = np.less_equal(*members)
    inside = {i for i, t in enumerate(TOKENS) if t and set(t.decode("utf-8", "replace")) <= set("abcdxyz0159-")}
    assert {i for i in np.flatnonzero(members).tolist()} == {i for i in inside if len(TOKENS[i]) <= 10}
    assert not inside & set(trie.sorted_ids.tolist())


def test_an_open_chain_gets_its_rest_trie_once_its_walks_cost_as_much(monkeypatch):
    """Until whole-trie walks from an open chain's configurations have cost what building
    its rest trie would, they stay whole-trie walks (a chain met in a few steps never
    pays for the trie); then the trie is built and the chain takes its tokens by length."""
    from collections import OrderedDict

    from ministruct.engine import slices
    from ministruct.engine.slices import rest_outside_kept

    monkeypatch.setattr(slices, "_OUTSIDE", OrderedDict())  # (none built in this process yet)
    monkeypatch.setattr(mask_walks, "OPEN_BUILD_S_PER_TOKEN", 1.0)  # (no walk costs that much)
    part = Repeat(OPEN_CLASS, 1, 12)
    expr = Seq((Literal('"'), part, Literal("."), part, Literal('"')))
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    cid = compiled._split(compiled.step_bytes(compiled.initial, b'"ab'))[1]
    assert compiled._slice_for(cid)[0] is None
    walked = compiled._renting
    assert walked is not None and rest_outside_kept(walked, compiled._index) is None
    compiled._rent[walked] = 1.0 * VOCAB.n_logits  # (as if walked that long)
    members, trie = compiled._slice_for(cid)
    assert members is not None and rest_outside_kept(walked, compiled._index) is trie


def test_the_slices_decide_most_string_masks():
    """The JSON character slice holds the tokens made only of string characters, with their
    lengths, and a long string's masks are decided through it (not only by walking)."""
    sl = index_for(VOCAB).slices["json-char"]
    for i, t in enumerate(TOKENS):
        try:
            text = t.decode()
        except UnicodeDecodeError:
            text = None
        inside = text is not None and not any(c in '"\\' or ord(c) < 0x20 for c in text)
        inside = inside and len(text) <= MAX_SLICE_CHARS
        assert (sl.length[i] != NOT_IN) == inside, t
        if inside:
            assert sl.length[i] == len(text)
    body = Repeat(char_class(['"', "\\"], negated=True), 0, 30)
    c = compile_grammar(Grammar({"root": Seq((Literal('"'), body, Literal('"')))}), VOCAB, use_cache=False)
    m = Matcher(c)
    m.advance(TOKENS.index(b'"'))
    m.mask()
    assert any(p.members is not None for p in c._walks.values())
    # a walk of the whole trie (a few letters or a string may start here) stops below '"'
    # once the slice's tokens are taken
    start = Alt((Seq((Literal('"'), body, Literal('"'))), Repeat(char_class(list("abcd"), False), 1, 3)))
    c = compile_grammar(Grammar({"root": start}), VOCAB, use_cache=False)
    m = Matcher(c)
    asked = []
    stable = c._pruner().stable
    object.__setattr__(c._prune, "stable", lambda states: asked.append(stable(states)) or asked[-1])
    m.mask()
    assert any(a.any() for a in asked)
    # a class of some string characters: its slice tokens are picked out by their characters
    letters = Repeat(char_class(list("abcdxyzéüñα"), negated=False), 1, 25)
    c = compile_grammar(Grammar({"root": Seq((Literal("-"), letters, Literal('"')))}), VOCAB, use_cache=False)
    m = Matcher(c)
    m.advance(TOKENS.index(b"-"))
    m.mask()
    assert any(alive != FULL for _, alive in c._members)  # slice tokens picked by their characters
    # a short bound: the slice's tokens of at most the characters left, written straight
    # into each mask by length, at every count, as the `regex` oracle has them
    short = Seq((Literal("-"), Repeat(letters.item, 1, 4), Literal('"')))
    c = compile_grammar(Grammar({"root": short}), VOCAB, use_cache=False)
    m = Matcher(c)
    m.advance(TOKENS.index(b"-"))
    one = b"|".join(regex.escape(ch.encode()) for ch in "abcdxyzéüñα")
    oracle = regex.compile(b"-(?:" + one + b'){1,4}"')
    out = b"-"
    for t in [b"a", b"b", b"c", b"d"]:
        mask = m.mask()
        want = [bool(tok) and oracle.fullmatch(out + tok, partial=True) is not None for tok in TOKENS]
        assert mask[: len(TOKENS)].tolist() == want, out
        m.advance(TOKENS.index(t))
        out += t
    assert any(isinstance(p.members, tuple) for p in c._walks.values())


@pytest.mark.parametrize("bound", [3, 30, None])
def test_a_string_body_in_a_rule_of_its_own_is_decided_by_the_slice(bound, monkeypatch):
    """`"\"" body "\""` with `body ::= char{1,n}` (grammar/limits.py hoists repeated bodies
    so): above the usual split the body's rule may end after any character, one frame
    deeper the closing quote is inside. The masks are the `regex` oracle's at every step,
    and a slice decides them (without the deeper split, none does)."""
    from test_matcher import to_bytes_regex

    body = Repeat(char_class(['"', "\\"], negated=True), 1, bound)
    dash, quote = Literal("-"), Literal('"')
    rules = {
        "root": Seq((dash, RuleRef("nested"), dash)),
        "nested": Seq((dash, RuleRef("string"), dash)),
        "string": Seq((quote, RuleRef("body"), quote)),
        "body": body,
    }
    oracle = regex.compile(to_bytes_regex(Seq((dash, dash, quote, body, quote, dash, dash))), flags=regex.DOTALL)
    for deeper in (True, False):
        if not deeper:
            monkeypatch.setattr(compile_module.CompiledGrammar, "_slice_split", compile_module.CompiledGrammar._split)
        c = compile_grammar(Grammar(rules), VOCAB, use_cache=False)
        m = Matcher(c)
        out = b""
        rng = random.Random(bound or 0)
        for step in range(12):
            mask = m.mask()
            want = [bool(t) and oracle.fullmatch(out + t, partial=True) is not None for t in TOKENS]
            assert mask[: len(TOKENS)].tolist() == want, out
            if out == b'--"':  # inside the string: are its slice tokens taken by length?
                members = c._walks[(mask_walks.ROOT, c._slice_split(c.mask_key(m.state))[1])].members
                assert (members is not None) == deeper
            legal = [i for i, w in enumerate(want) if w]
            if not legal:
                break
            i = TOKENS.index(b"-" if step < 2 else b'"') if step < 3 else rng.choice(legal)
            m.advance(i)
            out += TOKENS[i]


def test_a_character_outside_the_slice_between_stable_nodes_is_walked():
    """[^"] takes a newline too: below '"\\n' the tails are string characters again, but
    they were not taken at '"' (the newline is not one): they must still be found."""
    toks = [b"a", b'"', b'"\n', b'"\nx', b'"\nxy', b'"x', b'"xy', b"\n", b"x", b'x"', b""]
    vocab = Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])
    body = Repeat(CharClass(((0x22, 0x22),), negated=True), 0, None)
    # a few letters may start too: the walk goes over the whole trie, cutting below '"'
    start = Alt((Seq((Literal('"'), body, Literal('"'))), Repeat(char_class(list("abcd"), False), 1, 3)))
    m = Matcher(compile_grammar(Grammar({"root": start}), vocab, use_cache=False))
    assert [toks[i] for i in np.flatnonzero(m.mask())] == [b"a", b'"', b'"\n', b'"\nx', b'"\nxy', b'"x', b'"xy']


def test_tokens_longer_than_a_slice_holds_are_walked():
    n = MAX_SLICE_CHARS + 4
    long_ascii, long_wide = b"ab" * (n // 2), "é".encode() * (MAX_SLICE_CHARS + 1)
    toks = [b'"', b"a", b"b", long_ascii, long_wide, long_ascii + b'"', b""]
    vocab = Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])
    assert (index_for(vocab).slices["json-char"].length[[3, 4]] == NOT_IN).all()
    body = Repeat(char_class(['"', "\\"], negated=True), 0, None)
    m = Matcher(compile_grammar(Grammar({"root": Seq((Literal('"'), body, Literal('"')))}), vocab, use_cache=False))
    m.advance(0)
    assert np.flatnonzero(m.mask()).tolist() == [0, 1, 2, 3, 4, 5]
    bounded = Repeat(char_class(["a", "b", "é"], negated=False), 0, MAX_SLICE_CHARS + 2)
    m = Matcher(compile_grammar(Grammar({"root": Seq((Literal('"'), bounded, Literal('"')))}), vocab, use_cache=False))
    m.advance(0)
    assert np.flatnonzero(m.mask()).tolist() == [0, 1, 2, 4]  # n letters do not fit, MAX_SLICE_CHARS + 1 do


@pytest.mark.parametrize("bound", [24, 30, 60])
def test_a_bound_past_24_characters_decides_long_tokens_by_length(bound):
    """Runs of dashes or spaces as long as 80 characters are slice tokens: a string bound
    past them is followed to its end, and they are legal exactly while they fit (the
    `regex` oracle), taken by length rather than walked, at every count."""
    toks = [b'"', b"x"] + [b"-" * k for k in (1, 2, 3, 23, 24, 25, 29, 30, 31, 40, 59, 61, 80)] + [b'-"', b""]
    vocab = Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])
    assert (index_for(vocab).slices["json-char"].length[2:15] != NOT_IN).all()
    body = Repeat(char_class(['"', "\\"], negated=True), 0, bound)
    compiled = compile_grammar(Grammar({"root": Seq((Literal('"'), body, Literal('"')))}), vocab, use_cache=False)
    oracle = regex.compile(b'"[^"\\\\]{0,%d}"' % bound)
    m, out = Matcher(compiled), b'"'
    m.advance(0)
    m.mask()
    part = compiled._walks[(mask_walks.ROOT, compiled._slice_split(compiled.mask_key(m.state))[1])]
    assert isinstance(part.members, tuple) and part.members[1] == bound  # (lengths, the characters left)
    for _ in range(bound + 1):
        want = [bool(t) and oracle.fullmatch(out + t, partial=True) is not None for t in toks]
        assert m.mask()[: len(toks)].tolist() == want, len(out)
        if not want[1]:
            break
        m.advance(1)
        out += b"x"


# repeats longer than any token (this vocabulary's longest is 28 bytes, a slice token has at
# most MAX_SLICE_CHARS characters): walks and slice chains go on from a representative copy
long_strings = st.builds(
    lambda c, m, extra, tail: Seq((Literal('"'), Repeat(c, m, m + extra), Literal('"' + tail))),
    body | classes,
    st.sampled_from([0, 1, 26, 40]),
    st.integers(0, 70),
    st.sampled_from(["", "x"]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=long_strings, walk=st.lists(st.integers(0, 10_000), min_size=10, max_size=30))
def test_masks_in_long_repeats_equal_partial_matching(expr, walk):
    """Mostly the longest legal token at each step, so that walks run into both bounds."""
    rep, tail = expr.items[1], expr.items[2]
    # a character matches one way (UTF-8 is prefix-free): an atomic group keeps the
    # oracle's partial matching from backtracking through every split of a long repeat
    one_char = b"(?>" + oracle(rep.item) + b")"
    pattern = regex.compile(
        b'"' + one_char + b"{%d,%d}" % (rep.min, rep.max) + oracle(tail),
        flags=regex.DOTALL,
    )
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    walk_against_oracle(Matcher(compiled), pattern, walk, long_every=4)
    assert_cells_are_steps(compiled)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=strings | long_strings | repeats, walk=st.lists(st.integers(0, 10_000), max_size=8))
def test_slice_steps_read_off_states_equal_stepping_every_class(expr, walk):
    """Where a slice step is read off the automaton's states (no inner configurations),
    it names the configuration that stepping every class of every character shape names;
    where the alive characters (and where they lead) are read off the stacks' top
    states, they are what stepping every class path of the configuration says."""
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    m = Matcher(compiled)
    for choice in walk + [None]:
        legal = [t for t in np.flatnonzero(m.mask()).tolist() if t != EOG]
        if choice is None or not legal:
            break
        m.advance(legal[choice % len(legal)])
    chains = compiled._chains_of("json-char")
    for cid in range(len(compiled.configs)):
        assert chains._uniform(cid) == chains._uniform_stepped(cid), compiled.configs[cid]
        told = chains._alive_from_states(cid)
        if told is not _UNASKED:
            assert told == chains._alive_paths(cid), compiled.configs[cid]


email_parts = st.builds(
    lambda cls, bounds: (lambda part: Seq((part, Repeat(Seq((Literal(" "), part)), 0, 4), Literal("é"), part)))(
        Repeat(cls, *bounds)
    ),
    st.sampled_from([OPEN_CLASS, WORD_CLASS]),
    st.sampled_from([(1, 3), (1, 12), (2, 30), (1, None)]),
)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=email_parts, walk=st.lists(st.integers(0, 10_000), min_size=4, max_size=16))
def test_open_chain_steps_read_off_states_equal_stepping_every_class(expr, walk):
    """Where an open chain's step is read off the stacks' top states (a state takes all of
    its one-byte characters to one state, or none), it is the configuration the class
    segments of the step name; and the masks along the way are the oracle's."""
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    walk_against_oracle(Matcher(compiled), regex.compile(oracle(expr), flags=regex.DOTALL), walk, long_every=2)
    assert_cells_are_steps(compiled)
    chains = compiled._chains_of("json-char")
    for cid, answer in list(chains._open.items()):  # (some answered along another's chain)
        hint = chains._open_hint.get(cid)
        got = None if hint is None else chains._open_chain(cid, hint)
        if got is not None:  # (open_limit takes the chain it was reached along first)
            assert got == answer, compiled.configs[cid]
    told = 0
    for cid in range(1, len(compiled.configs)):
        for aid in range(len(chains._alive_sets)):
            found = chains._follow_by_states(cid, aid)
            if found is not _UNASKED:
                told += 1
                assert found == chains._follow_stepped(cid, aid), compiled.configs[cid]
    assert told


def test_a_part_that_may_end_after_any_character_is_decided_one_frame_deeper(monkeypatch):
    """An e-mail's local part: `part ("." part)*`, with the repeated `"." part` a rule of
    its own whose part may return after any character, so above the usual split no chain
    of the part's characters is free of returns. One frame deeper (the '.' or '@' that
    follows is inside) the open chain takes the part's tokens by length, as it does in
    the first part; without the deeper split it does not."""
    part = Repeat(WORD_CLASS, 1, 12)
    # (this vocabulary has no '.' nor '@': a space and 'é' stand for them; the address is
    # a string of an item of something, deep enough for a base below the split)
    email = Seq((part, Repeat(Seq((Literal(" "), part)), 0, 4), Literal("é"), part))
    root = Seq((Literal('"'), RuleRef("item"), Literal('"')))
    grammar = Grammar({"root": root, "item": Seq((RuleRef("email"), Literal("x"))), "email": email})
    pattern = regex.compile(b'"' + oracle(email) + b'x"', flags=regex.DOTALL)
    compiled = compile_grammar(grammar, VOCAB, use_cache=False)
    m = Matcher(compiled)
    for piece in (b'"', b"a", b"b", b" "):
        m.advance(TOKENS.index(piece))
    assert_mask_is_oracles(m.mask(), pattern, b'"ab ')
    members, _ = compiled._slice_for(compiled._slice_split(compiled.mask_key(m.state))[1])
    assert members is not None
    members, _ = compiled._slice_for(compiled._split(compiled.mask_key(m.state))[1])
    assert members is None


def test_a_string_called_from_each_copy_of_a_repeat_is_walked_above_the_callers_frame(monkeypatch):
    """An array's string items: `item (" " item){0,4}` with the item a rule, called from each
    copy of the repeat, one return point per copy. Above that frame the slice decides the
    string, so the split leaves the caller's frame in the base and the second, third and
    fourth items' characters walk from one relative configuration; with the usual split
    each copy has its own. Masks against the oracle."""
    item = Seq((Literal('"'), Repeat(char_class(['"', "\\"], negated=True), 0, 12), Literal('"')))
    root = Seq((Literal("-"), RuleRef("item"), Repeat(Seq((Literal(" "), RuleRef("item"))), 0, 4), Literal("-")))
    grammar = Grammar({"root": root, "item": item})
    pattern = regex.compile(b"-" + oracle(item) + b"(?: " + oracle(item) + b"){0,4}-", flags=regex.DOTALL)

    def relative_configurations(split) -> set[int]:
        compiled = compile_grammar(grammar, VOCAB, use_cache=False)
        m, out, rels = Matcher(compiled), b"-", set()
        m.advance(TOKENS.index(b"-"))
        for k in range(4):
            for piece in ([b'"'] if k == 0 else [b'"', b" ", b'"']) + [b"a", b"b"]:
                m.advance(TOKENS.index(piece))
                out += piece
            assert_mask_is_oracles(m.mask(), pattern, out)
            if k:
                rels.add(split(compiled)(compiled.mask_key(m.state))[1])
        return rels

    assert len(relative_configurations(lambda c: c._slice_split)) == 1
    # neither the top split (one frame kept) nor the shallower one: one per copy
    monkeypatch.setattr(mask_walks, "ROOT_KEEP_FRAMES", mask_walks.KEEP_FRAMES)
    monkeypatch.setattr(compile_module.CompiledGrammar, "_shallower", lambda self, base, rel, chains: (base, rel))
    assert len(relative_configurations(lambda c: c._slice_split)) == 3


def test_the_letters_rest_trie_comes_with_the_index(monkeypatch):
    """The trie of the tokens not made of ASCII letters alone is built with the
    vocabulary's index and saved with it: an open chain over letters and more walks it from
    its first step, with nothing built or rented in the process."""
    from collections import OrderedDict

    from ministruct.engine import slices
    from ministruct.engine.slices import INDEXED_OUTSIDE, _from_arrays, _to_arrays, rest_outside

    letters = INDEXED_OUTSIDE[0]
    index = index_for(VOCAB)
    loaded = _from_arrays(_to_arrays(index), VOCAB.n_logits)
    assert loaded.outside[letters].keys() == index.outside[letters].keys()
    monkeypatch.setattr(slices, "_OUTSIDE", OrderedDict())
    monkeypatch.setattr(mask_walks, "OPEN_BUILD_S_PER_TOKEN", 1.0)  # (no walk costs that much)
    built = rest_outside(index.slices["json-char"], letters, index.trie)  # (the same, built here)
    monkeypatch.setattr(slices, "_OUTSIDE", OrderedDict())
    part = Repeat(WORD_CLASS, 1, 12)
    expr = Seq((Literal('"'), part, Literal("."), part, Literal('"')))  # ('.' leaves the letters)
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    cid = compiled._split(compiled.step_bytes(compiled.initial, b'"ab'))[1]
    members, trie = compiled._slice_for(cid)
    assert members is not None and compiled._renting is None
    assert sorted(trie.sorted_ids.tolist()) == sorted(built.sorted_ids.tolist())
    assert trie.sorted_ids.tolist() == loaded.outside[letters]["sorted_ids"].tolist()


def test_configurations_whose_masks_hold_the_same_tokens_share_one_mask():
    """Each character of a string bounded past the longest token is a configuration of its
    own (short of the end, where no representative copy of the repeat stands for it), with
    the same tokens legal: one mask array serves them (a new mask of a 262k vocabulary is
    64 fresh pages), and it is the oracle's at each of them."""
    body = Repeat(char_class(['"', "\\"], negated=True), 0, 60)
    expr = Seq((Literal('"'), body, Literal('"')))
    compiled = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False)
    pattern = regex.compile(oracle(expr), flags=regex.DOTALL)
    m, out, masks, states = Matcher(compiled), b'"' + b"a" * 40, [], set()
    for t in out:
        m.advance(TOKENS.index(bytes([t])))
    for _ in range(6):  # (20 to 15 characters left, more than any token has: 7)
        masks.append(m.mask())
        states.add(compiled.mask_key(m.state))
        assert_mask_is_oracles(masks[-1], pattern, out)
        m.advance(TOKENS.index(b"a"))
        out += b"a"
    assert len(states) > 1 and all(mask is masks[0] for mask in masks)


def test_a_string_character_step_is_read_off_states():
    """In a JSON string, every character leads each position to the next one: the slice
    step is told by the states alone, for the unbounded and the bounded string."""
    body = CharClass(((0x00, 0x1F), (0x22, 0x22), (0x5C, 0x5C)), negated=True)
    for rep in (Repeat(body, 0, None), Repeat(body, 2, 30)):
        compiled = compile_grammar(Grammar({"root": Seq((Literal('"'), rep, Literal('"')))}), VOCAB, use_cache=False)
        m = Matcher(compiled)
        m.advance(TOKENS.index(b'"'))
        m.mask()
        chains = compiled._chains_of("json-char")
        told = [chains._state_uniform(st[-1]) for st in compiled.configs[m.state]]
        assert None not in told and any(t >= 0 for t in told)  # (-1: the closing quote's state)
        assert chains._uniform(m.state) == chains._uniform_stepped(m.state) != 0


@pytest.mark.parametrize(
    "ranges",
    [
        ((0x30, 0x39),),  # digits: no token past ASCII can fit
        ((0x61, 0x7A), (0x7F, 0x7F)),  # top at the last ASCII code point
        ((0x61, 0x64), (0x80, 0x80)),  # top at the first code point past ASCII
        ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0xFF)),  # Latin-1, not Greek or CJK
        ((0x61, 0x7A), (0x3B1, 0x3C9), (0x4E2D, 0x4E2D)),
        ((0x20, 0x10FFFF),),
    ],
    ids=["digits", "to-7f", "to-80", "latin1", "greek-cjk", "all"],
)
def test_slice_lengths_within_a_set_equal_the_definition(ranges):
    """lengths_within: a slice token's character count where every one of its characters is
    in `ranges`, else NOT_IN (the code point table stops at the highest range)."""
    from ministruct.engine.slices import lengths_within

    sl = index_for(VOCAB).slices["json-char"]
    got = lengths_within(sl, ranges)
    for tid, tok in enumerate(TOKENS):
        want = NOT_IN
        if sl.length[tid] != NOT_IN:
            chars = tok.decode("utf-8")
            if all(any(a <= ord(c) <= b for a, b in ranges) for c in chars):
                want = len(chars)
        assert got[tid] == want, (tok, ranges)
    assert (got != NOT_IN).any()


def test_lengths_within_a_set_are_kept_on_disk(monkeypatch, tmp_path):
    """A set's lengths are found once per vocabulary and kept in the cache folder: a later
    process loads them (here: the process's own store emptied, finding them forbidden), and
    a damaged file is found again."""
    from collections import OrderedDict

    from ministruct.engine import slices

    monkeypatch.setenv("MINISTRUCT_CACHE_DIR", str(tmp_path))
    sl = index_for(VOCAB).slices["json-char"]
    digits = ((0x30, 0x39),)
    monkeypatch.setattr(slices, "_LENGTHS", OrderedDict())
    found = slices.lengths_within(sl, digits)
    (saved,) = (tmp_path / "engine" / "lengths").iterdir()
    monkeypatch.setattr(slices, "_LENGTHS", OrderedDict())
    real = slices._lengths_within
    monkeypatch.setattr(slices, "_lengths_within", lambda *a: pytest.fail("found again"))
    loaded = slices.lengths_within(sl, digits)
    assert loaded is not found and (loaded == found).all() and not loaded.flags.writeable
    saved.write_bytes(saved.read_bytes()[:-10] + b"0123456789")
    monkeypatch.setattr(slices, "_LENGTHS", OrderedDict())
    monkeypatch.setattr(slices, "_lengths_within", real)
    assert (slices.lengths_within(sl, digits) == found).all()


@pytest.mark.parametrize(
    "ranges",
    [((0x30, 0x39),), ((0x61, 0x7A), (0x3B1, 0x3C9), (0x4E2D, 0x4E2D)), ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF))],
    ids=["digits", "greek-cjk", "string"],
)
def test_tokens_starting_in_a_set_count_their_first_bytes(ranges):
    """tokens_starting_in: the tokens whose first byte begins some character of `ranges`
    (so at least those whose first character is in it)."""
    from ministruct.engine.slices import tokens_starting_in

    leads = set()
    for a, b in ranges:  # (a first byte past ASCII begins at least 64 consecutive code points)
        for cp in [*range(a, min(b, 0x7F) + 1), *range(max(a, 0x80), b + 1, 64), b]:
            if not 0xD800 <= cp <= 0xDFFF and cp >= a:
                leads.add(chr(cp).encode()[0])
    want = sum(1 for tok in TOKENS if tok and tok[0] in leads)
    got = tokens_starting_in(index_for(VOCAB).trie, ranges)
    assert got == want
    first_in = sum(1 for tok in TOKENS if tok and _first_char_in(tok, ranges))
    assert got >= first_in > 0


def _first_char_in(tok: bytes, ranges) -> bool:
    text = tok.decode("utf-8", errors="ignore")
    return (
        bool(text)
        and text[0].encode() == tok[: len(text[0].encode())]
        and any(a <= ord(text[0]) <= b for a, b in ranges)
    )


intervals = st.tuples(st.integers(0x80, 0x87), st.integers(0, 3)).map(lambda t: (t[0], min(0x87, t[0] + t[1])))


@settings(max_examples=200, deadline=None)
@given(st.integers(1, 3).flatmap(lambda k: st.lists(st.tuples(*[intervals] * k), min_size=1, max_size=12)))
def test_merged_interval_sequences_spell_the_same_byte_strings(seqs):
    """slices.merge_products: fewer products of byte intervals, the same byte strings."""
    from itertools import product

    from ministruct.engine.utf8 import merge_products

    def spelled(ss):
        return {p for ivs in ss for p in product(*(range(lo, hi + 1) for lo, hi in ivs))}

    merged = merge_products(list(seqs))
    assert spelled(merged) == spelled(seqs)
    assert len(merged) <= len(set(seqs))


# ---------------------------------------------------------------- warming (CompiledGrammar.warm)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(expr=strings | long_strings, walk=st.lists(st.integers(0, 10_000), max_size=8))
def test_warming_changes_no_mask(expr, walk):
    """compile_grammar(warm=True) follows the repeats' chains before the first mask; a grammar
    bound without it (CompiledGrammar alone) gives the same masks along the same walk, and every
    cell the warming wrote is the automaton's own step."""
    warmed = compile_grammar(Grammar({"root": expr}), VOCAB, use_cache=False, warm=True)
    cold = compile_module.CompiledGrammar(Grammar({"root": expr}), VOCAB)
    a, b = Matcher(warmed), Matcher(cold)
    for choice in walk + [None]:
        mask = a.mask()
        assert (mask == b.mask()).all()
        legal = [t for t in np.flatnonzero(mask).tolist() if t != EOG]
        if choice is None or not legal:
            break
        a.advance(legal[choice % len(legal)])
        b.advance(legal[choice % len(legal)])
    if len(warmed.transitions) > 1:
        assert_cells_are_steps(warmed)


def test_warming_follows_a_bounded_string_before_the_first_mask(unbounded_warm):
    """A string of at most 60 characters, over tokens as long as 80 (no copy of the repeat
    stands for another): compile_grammar(warm=True) follows its chain to the end, so the masks inside
    the string follow it no more. (The warming runs to its end here: at its time budget,
    a busy machine follows less of the chain.)"""
    toks = [b'"', b"x"] + [b"-" * k for k in (1, 2, 3, 23, 24, 25, 29, 30, 31, 40, 59, 61, 80)] + [b'-"', b""]
    vocab = Vocabulary.from_bytes(toks, eog_ids=[len(toks) - 1])
    body = Repeat(char_class(['"', "\\"], negated=True), 0, 60)
    compiled = compile_grammar(
        Grammar({"root": Seq((Literal('"'), body, Literal('"')))}), vocab, use_cache=False, warm=True
    )
    chains = compiled._chains["json-char"]
    followed = len(chains._next)
    assert followed >= 59
    m = Matcher(compiled)
    for t in (0, 1, 1, 4):
        m.advance(t)
        m.mask()
    assert len(chains._next) <= followed + 1  # (the quote's configuration, before the chain)


def test_a_short_chain_is_walked_without_finding_its_token_set(monkeypatch):
    """Two digits left of a four-digit string: walking the few tokens they allow costs
    less than finding the slice tokens made of digits (262k of them on a big vocabulary).
    The masks are the oracle's, and the set is never asked for."""
    from collections import OrderedDict

    from ministruct.engine import slices

    monkeypatch.setattr(slices, "_LENGTHS", OrderedDict())  # (no set this process found before)
    asked = []
    real = mask_walks.lengths_within
    monkeypatch.setattr(mask_walks, "lengths_within", lambda sl, r: asked.append(r) or real(sl, r))
    digits = CharClass(((0x30, 0x39),))
    expr = Seq((Literal('"'), Repeat(digits, 4, 4), Literal('"')))
    compiled = compile_module.CompiledGrammar(Grammar({"root": expr}), VOCAB)  # (unwarmed: no set asked before)
    pattern = regex.compile(oracle(expr), flags=regex.DOTALL)
    m, out = Matcher(compiled), b""
    for piece in (b'"', b"1", b"5"):
        m.advance(TOKENS.index(piece))
        out += piece
    assert_mask_is_oracles(m.mask(), pattern, out)
    assert ((0x30, 0x39),) not in asked
