"""Masks of ambiguous grammars (many parses alive at once, as in a Lark grammar of SQL with
optional gaps between lexemes), checked against oracles that share no code with the engine.

What these exercise: single-character alternatives built as one class (automaton.py), and
rows of configurations of many stacks filled cell by cell for narrow trie nodes (table.py
`fill_cells`).
"""

from __future__ import annotations

import itertools
from pathlib import Path

import numpy as np
import pytest
import regex
from oracles import LlamaGrammarOracle  # tests/ is on sys.path (rootdir conftest)
from test_exact_llamacpp import comparable_ids, completed_by_llamacpp, describe, llama_side  # noqa: F401

from ministruct.engine import kernel
from ministruct.engine import table as table_mod
from ministruct.engine.automaton import Automaton
from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.engine.table import CELLS_MIN_STACKS, DEAD, Transitions
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.gbnf.parse import parse_gbnf
from ministruct.grammar.ir import Alt, CharClass, Grammar, Literal, Repeat, Seq

# a SELECT subset where gaps may be empty, so "selecta asb" has many parses: keywords and
# names overlap, and a name may end at every character
SQLISH = r"""
root ::= "select" item ("," item)* gap "from" gap name (gap "where" cond)?
item ::= gap expr ((gap "as")? gap name)?
expr ::= term (gap ("+" | "and" | "or") term)*
term ::= gap name ("." name)? | gap [0-9]+
cond ::= expr gap ("=" | "in" | "is") expr
name ::= ("_" | [A-Z] | [a-z]) ("_" | [A-Z] | [a-z] | [0-9])*
gap ::= [ ]*
"""
# the same language as a bytes regex, written by hand
_GAP = rb" *"
_NAME = rb"[_A-Za-z][_A-Za-z0-9]*"
_TERM = rb"(?:" + _GAP + _NAME + rb"(?:\." + _NAME + rb")?|" + _GAP + rb"[0-9]+)"
_EXPR = _TERM + rb"(?:" + _GAP + rb"(?:\+|and|or)" + _TERM + rb")*"
_ITEM = _GAP + _EXPR + rb"(?:(?:" + _GAP + rb"as)?" + _GAP + _NAME + rb")?"
_COND = _EXPR + _GAP + rb"(?:=|in|is)" + _EXPR
SQLISH_RE = regex.compile(
    rb"select"
    + _ITEM
    + rb"(?:,"
    + _ITEM
    + rb")*"
    + _GAP
    + rb"from"
    + _GAP
    + _NAME
    + rb"(?:"
    + _GAP
    + rb"where"
    + _COND
    + rb")?"
)
TOKENS = [
    b"select",
    b"sel",
    b"ect",
    b" ",
    b"  ",
    b"a",
    b"as",
    b" as",
    b"s",
    b"x",
    b"_",
    b"Z9",
    b"an",
    b"d",
    b"and",
    b" and",
    b"or",
    b"o",
    b"r",
    b"+",
    b".",
    b",",
    b"from",
    b"fr",
    b"om",
    b" from",
    b"where",
    b"wh",
    b"ere",
    b"=",
    b"in",
    b"is",
    b"i",
    b"1",
    b"07",
    b"a1",
    b"xfrom",
    "é".encode(),
]
VOCAB = Vocabulary.from_bytes(TOKENS + [b""], eog_ids=[len(TOKENS)])


def oracle_mask(out: bytes) -> np.ndarray:
    want = np.zeros(len(TOKENS) + 1, dtype=bool)
    for tid, tok in enumerate(TOKENS):
        want[tid] = SQLISH_RE.fullmatch(out + tok, partial=True, timeout=10.0) is not None
    want[len(TOKENS)] = SQLISH_RE.fullmatch(out, timeout=10.0) is not None
    return want


@pytest.mark.parametrize("compiled_walk", [False, True], ids=["numpy", "compiled"])
def test_masks_of_many_parses_equal_the_regex_oracle(monkeypatch, compiled_walk):
    if compiled_walk:
        assert kernel.available(), kernel.failure()  # (the compiled walk asks for cells: fill_cells)
    monkeypatch.setattr(kernel, "wanted", lambda: compiled_walk)
    compiled = compile_grammar(parse_gbnf(SQLISH), VOCAB, use_cache=False)
    widest = 0
    for walk in range(12):
        rng = np.random.default_rng(walk)
        m = Matcher(compiled)
        out = b""
        for step in range(40):
            widest = max(widest, len(compiled.configs[m.state]))
            mask = np.asarray(m.mask())
            want = oracle_mask(out)
            assert (mask == want).all(), (
                walk,
                step,
                out,
                [TOKENS[i] for i in np.flatnonzero(mask != want[: len(mask)])],
            )
            legal = [t for t in np.flatnonzero(mask).tolist() if t != len(TOKENS)]
            if not legal:
                break
            tid = legal[int(rng.integers(len(legal)))]
            m.advance(tid)
            out += TOKENS[tid]
    assert widest >= CELLS_MIN_STACKS  # the walks did reach configurations whose cells are stepped apart


def _class_of(cuts: list[int]) -> np.ndarray:
    return (np.searchsorted(np.asarray(cuts), np.arange(256), side="right") - 1).astype(np.int64)


def test_cells_stepped_one_by_one_equal_the_whole_row(monkeypatch):
    a = Automaton(parse_gbnf(SQLISH))
    cuts = a.byte_boundaries()
    bc = _class_of(cuts)
    rep = np.asarray(cuts[:-1], dtype=np.int64)
    monkeypatch.setattr(table_mod, "FEW_CELLS", 3)
    by_cell = Transitions(a, bc, rep, "<t>")
    by_row = Transitions(a, bc, rep, "<t>")
    for text in (b"select", b"selecta", b"select a as", b"select x from y where a"):
        config = a.step_bytes(a.initial, text)
        s_cell, s_row = by_cell.intern(config), by_row.intern(config)
        by_row.fill_row(s_row)
        classes = np.asarray([int(bc[b]) for b in b"a."], dtype=np.int64)
        by_cell.fill_cells(np.full(len(classes), s_cell), classes)
        assert not by_cell.complete[s_cell]  # (only the cells asked for)
        for c in classes.tolist():
            got, want = int(by_cell.table[s_cell, c]), int(by_row.table[s_row, c])
            assert by_cell.configs[got] == by_row.configs[want]
            assert (got == DEAD) == (want == DEAD)
        many = np.arange(by_cell.n_classes, dtype=np.int64)
        by_cell.fill_cells(np.full(len(many), s_cell), many)  # more than FEW_CELLS: the whole row
        assert by_cell.complete[s_cell]
        assert [by_cell.configs[x] for x in by_cell.table[s_cell]] == [by_row.configs[x] for x in by_row.table[s_row]]


# ------------------------------------------------------------------ single-character alternatives

LETTER = Alt((Literal("_"), CharClass(((0x41, 0x5A),)), CharClass(((0x61, 0x7A),))))


def _strings(alphabet: str, n: int):
    for k in range(n + 1):
        for chars in itertools.product(alphabet, repeat=k):
            yield "".join(chars).encode()


@pytest.mark.parametrize(
    "expr,pattern",
    [
        (Repeat(LETTER, 1, None), rb"[_A-Za-z]+"),
        (
            Seq((Alt((Literal("a"), Literal("b"), Literal("ab"), CharClass(((0x30, 0x39),)))), Literal("!"))),
            rb"(?:a|b|ab|[0-9])!",
        ),
        (Alt((Literal("é"), CharClass(((0x61, 0x61),), negated=True), Literal("ab"))), rb"(?:\xc3\xa9|[^a]|ab)"),
    ],
    ids=["letters", "literal-sharing-a-prefix", "negated"],
)
def test_single_character_alternatives_keep_the_language(expr, pattern):
    a = Automaton(Grammar({"root": expr}))
    # (the negated class is any code point but 'a': the oracle spells it in UTF-8)
    pat = regex.compile(
        pattern.replace(
            rb"[^a]", "(?:[^a\x80-\xff]|[\xc2-\xdf][\x80-\xbf]|\xe0[\xa0-\xbf][\x80-\xbf])".encode("latin-1")
        )
    )
    for s in _strings("_aZb9!é-", 3):
        config = a.step_bytes(a.initial, s)
        assert bool(config) == (pat.fullmatch(s, partial=True) is not None), s
        assert a.is_accepting(config) == (pat.fullmatch(s) is not None), s


def test_single_character_alternatives_leave_one_parse_per_character():
    a = Automaton(Grammar({"root": Repeat(LETTER, 1, None)}))
    config = a.initial
    for b in b"aZ_q":
        config = a.step(config, b)
        assert len([st for st in config if st]) == 1


# ------------------------------------------------------------------ the real vocabulary, against llama.cpp

LARK_GRAMMARS = Path(__file__).resolve().parents[2] / "benchmarks" / "grammars"


@pytest.mark.model
@pytest.mark.parametrize("name", ["sql_select.lark", "python_expr.lark"])
def test_lark_grammar_masks_equal_llamacpp_along_random_walks(llama_side, name):  # noqa: F811 (the fixture)
    """benchmarks/grammars' SQL and Python expressions (keywords and names overlap, gaps may
    be empty: 30-150 parses alive inside a name; the Python one written left-recursive) on
    SmolLM2: every mask equals llama.cpp's grammar sampler's on the same grammar (our GBNF
    export of it, left recursion rewritten away), step for step."""
    from ministruct.grammar.constraint import load_constraint

    vocab_p, n, vocab = llama_side
    grammar = load_constraint(lark=str(LARK_GRAMMARS / name), lark_lexer="cfl").grammar  # (greedy: test_greedy.py)
    text = grammar.to_gbnf()
    assert LlamaGrammarOracle.accepts_grammar(vocab_p, text, grammar.root)
    keep = comparable_ids(vocab, n)
    compiled = compile_grammar(grammar, vocab, use_cache=False)
    widest = 0
    for walk in range(2):
        rng = np.random.default_rng(walk)
        matcher = Matcher(compiled)
        oracle = LlamaGrammarOracle(vocab_p, n, text, grammar.root)
        out = b""
        try:
            for step in range(25):
                widest = max(widest, len(compiled.configs[matcher.state]))
                ours = np.asarray(matcher.mask())
                theirs = oracle.legal()
                diff = (ours != theirs) & keep
                for i in np.flatnonzero(diff & ours):
                    if completed_by_llamacpp(vocab, int(i), theirs):
                        diff[i] = False
                assert not diff.any(), (walk, step, out[-60:], describe(vocab, np.flatnonzero(diff)))
                both = np.flatnonzero(ours & theirs & keep)
                token = int(both[rng.integers(both.size)])
                if token in vocab.eog_ids:
                    break
                oracle.accept(token)
                matcher.advance(token)
                out += vocab.tokens[token]
        finally:
            oracle.close()
    assert widest >= CELLS_MIN_STACKS


# ------------------------------------------------------------------ optionals beside a sibling that begins the same way

# Python's brackets: a list display beside a comprehension, a subscript beside a slice; each
# alternative that begins with an optional `test` has a sibling that begins with `test`
BRACKETS = r"""
root ::= test
test ::= atom ("[" sub "]")*
sub ::= test | test? ":" test?
atom ::= name | "(" test? ")" | "[" (test ("," test)*)? "]" | "[" test " for " name " in " test "]"
name ::= [a-z]+
"""


@pytest.mark.parametrize("opening", ["[", "x["], ids=["display", "subscript"])
def test_nested_brackets_keep_the_parses_alive_constant(opening):
    """An optional opened into its two cases shares its sibling's call: the parses alive do
    not double with each nesting (with both calls kept, 8 nestings held 2**8 times as many)."""
    a = Automaton(parse_gbnf(BRACKETS))
    widths = [len(a.step_bytes(a.initial, (opening * depth + "x").encode())) for depth in (1, 2, 4, 8)]
    assert all(widths), widths
    assert widths == [widths[0]] * 4, widths


def test_opened_optionals_keep_the_language():
    """Each case of an opened optional, and nothing else: whole strings and prefixes of the
    bracket grammar against a recursive `regex` pattern of the same language."""
    pat = regex.compile(
        rb"(?P<test>(?P<atom>[a-z]+|\((?&test)?\)|\[(?:(?&test)(?:,(?&test))*)?\]|\[(?&test) for [a-z]+ in (?&test)\])"
        rb"(?:\[(?:(?&test)|(?&test)?:(?&test)?)\])*)"
    )
    a = Automaton(parse_gbnf(BRACKETS))
    for s in _strings("x[]:,(", 5):
        config = a.step_bytes(a.initial, s)
        assert a.is_accepting(config) == (pat.fullmatch(s) is not None), s
    for s in (b"[x for y in [z]]", b"[x for y in z", b"x[:]", b"x[a:b][c]", b"[[x for y in z]]", b"[ for"):
        config = a.step_bytes(a.initial, s)
        assert bool(config) == (pat.fullmatch(s, partial=True) is not None), s
        assert a.is_accepting(config) == (pat.fullmatch(s) is not None), s


@pytest.mark.model
def test_opened_optionals_masks_equal_llamacpp(llama_side):  # noqa: F811 (the fixture)
    """The bracket grammar on SmolLM2, walked into nested brackets: every mask equals
    llama.cpp's grammar sampler's."""
    vocab_p, n, vocab = llama_side
    keep = comparable_ids(vocab, n)
    compiled = compile_grammar(parse_gbnf(BRACKETS), vocab, use_cache=False)
    opening = [i for i in range(vocab.n_tokens) if vocab.tokens[i] in (b"[", b"x[", b"[[", b"(")]
    deepest = 0
    for walk in range(3):
        rng = np.random.default_rng(walk)
        matcher = Matcher(compiled)
        oracle = LlamaGrammarOracle(vocab_p, n, BRACKETS)
        out = b""
        try:
            for step in range(20):
                ours = np.asarray(matcher.mask())
                theirs = oracle.legal()
                diff = (ours != theirs) & keep
                assert not diff.any(), (walk, step, out[-60:], describe(vocab, np.flatnonzero(diff)))
                both = np.flatnonzero(ours & theirs & keep)
                nesting = [t for t in opening if ours[t] and theirs[t]]
                pool = (
                    nesting if nesting and step < 5 else both.tolist()
                )  # (into the brackets first: llama.cpp's own parses double)
                token = int(pool[rng.integers(len(pool))])
                if token in vocab.eog_ids:
                    break
                oracle.accept(token)
                matcher.advance(token)
                out += vocab.tokens[token]
                deepest = max(deepest, sum(out.count(c) for c in b"[(") - sum(out.count(c) for c in b"])"))
        finally:
            oracle.close()
    assert deepest >= 4  # the walks went into nested brackets
