"""engine/table.py: configuration ids when interning one grows the arrays; cells filled
through a configuration's parts, against the automaton's own stepping."""

from __future__ import annotations

import numpy as np
import pytest

from ministruct.engine.automaton import Automaton
from ministruct.engine.table import DEAD, UNKNOWN, Transitions
from ministruct.grammar.gbnf.parse import parse_gbnf


def test_an_image_interned_while_the_table_grows_is_read_from_the_grown_arrays():
    tr = Transitions(None, np.zeros(256, dtype=np.int64), np.zeros(1, dtype=np.int64), "<t>")  # type: ignore[arg-type]
    capacity = len(tr.canon)
    mapped = capacity + 10  # (a state none of the rows below holds)
    tr.set_canon_map({mapped: 1})
    for q in range(2, capacity):  # ids 1 .. capacity-2
        tr.intern(frozenset({(q,)}))
    assert len(tr) == capacity - 1
    last = tr.intern(frozenset({(mapped,)}))  # the last free row; its image {(1,)} is new and grows the table
    image = tr.intern(frozenset({(1,)}))
    assert last == capacity - 1 and image == capacity and len(tr.canon) > capacity
    assert tr.canon[last] == image and tr.canon[image] == image


# ------------------------------------------------------------------ parts (unions of configurations)

# a SELECT subset whose gaps may be empty: a name may end at every character, and keywords
# overlap names, so configurations hold many stacks
SQLISH = r"""
root ::= "select" item ("," item)* gap "from" gap name (gap "where" cond)?
item ::= gap expr ((gap "as")? gap name)?
expr ::= term (gap ("+" | "and" | "or") term)*
term ::= gap name ("." name)? | gap [0-9]+ | gap "(" expr gap ")"
cond ::= expr gap ("=" | "in" | "is") expr
name ::= ("_" | [A-Z] | [a-z]) ("_" | [A-Z] | [a-z] | [0-9])*
gap ::= [ ]*
"""
PIECES = [b"select", b" ", b"a", b"s", b"as", b"x", b"f", b"fr", b"from", b"and", b"or", b"o", b"r", b"+", b".", b",",
          b"where", b"w", b"in", b"is", b"=", b"1", b"(", b")", b"_", b"\xc3\xa9"]  # fmt: skip


def _transitions(grammar_text: str) -> tuple[Automaton, Transitions, np.ndarray]:
    a = Automaton(parse_gbnf(grammar_text))
    cuts = a.byte_boundaries()
    bc = (np.searchsorted(np.asarray(cuts), np.arange(256), side="right") - 1).astype(np.int64)
    return a, Transitions(a, bc, np.asarray(cuts[:-1], dtype=np.int64), "<t>"), bc


@pytest.mark.parametrize("seed", range(6))
def test_cells_filled_through_parts_equal_stepping_the_automaton(seed):
    """Brute force: along random texts the table is filled every way it can be (whole rows,
    a few cells, one cell at a time), so cells of configurations that have parts are filled
    from the parts' cells and rows; every known cell then equals the automaton's own step of
    the whole configuration, and every configuration is the union of its parts."""
    a, tr, bc = _transitions(SQLISH)
    rng = np.random.default_rng(seed)
    start = tr.intern(a.initial)
    for _ in range(25):
        text = b"select" + b"".join(PIECES[i] for i in rng.integers(len(PIECES), size=int(rng.integers(1, 14))))
        s = start
        for b in text:
            how = int(rng.integers(3))
            if how == 0:
                tr.fill_row(s)
            elif how == 1:
                classes = rng.integers(tr.n_classes, size=3)
                tr.fill_cells(np.full(len(classes), s), classes)
            s = tr.get(s, int(bc[b]))
            if s == DEAD:
                break
    assert tr.parts, "no configuration was made of parts"
    via_parts = 0
    for cid in range(1, len(tr)):
        config = tr.configs[cid]
        parts = tr.parts.get(cid)
        if parts is not None:
            assert frozenset().union(*(tr.configs[p] for p in parts)) == config
            assert all(len(tr.configs[p]) < len(config) for p in parts)
        for c in np.flatnonzero(tr.table[cid] != UNKNOWN).tolist():
            want = a.step(config, int(tr.class_rep[c]))
            assert tr.configs[int(tr.table[cid, c])] == want, (config, c)
            via_parts += parts is not None
    assert via_parts > 100  # (cells of configurations with parts were filled and checked)


def test_a_union_past_the_stack_limit_is_refused(monkeypatch):
    from ministruct.engine import table as table_mod
    from ministruct.errors import CompileLimitError

    monkeypatch.setattr(table_mod, "MAX_STACKS", 3)
    tr = Transitions(None, np.zeros(256, dtype=np.int64), np.zeros(1, dtype=np.int64), "<t>")  # type: ignore[arg-type]
    ids = [tr.intern(frozenset({(q,), (q + 100,)})) for q in (1, 2)]
    with pytest.raises(CompileLimitError, match="too ambiguous"):
        tr.union(ids)


def test_options_that_begin_with_a_class_leave_one_parse_alive():
    """Alternatives led by character classes (and literals) step from one state: after the
    first byte one stack is alive per way on, not one per option (each option's class is
    built from the alternative's own state, so nothing of it reaches another option)."""
    grammar = parse_gbnf('root ::= [a-m] "1" | [n-z] "2" | "x" [0-9] "3" | [é-ü] "4" | ("ab")* "5"\n')
    auto = Automaton(grammar)
    start = auto.closure((auto.start[grammar.root],))
    assert len(start) == 3  # the classes and "x" from one state; the repeat's two ways on apart
    assert sum(len(auto.byte_edges[st[-1]]) > 1 for st in start) == 1
    assert len(auto.step(start, ord("c"))) == 1
    assert len(auto.step(start, ord("x"))) == 2  # [n-z] "2" and "x" [0-9] "3"
    cases = [("c1", 1), ("x2", 1), ("x53", 1), ("é4", 1), ("ü4", 1), ("ab5", 1), ("5", 1), ("c2", 0), ("é1", 0)]
    for text, ok in cases:
        assert auto.is_accepting(auto.step_bytes(start, text.encode())) is bool(ok), text


def test_a_literals_rows_are_filled_along_it_and_equal_stepping_the_automaton():
    """Filling the row of a configuration inside a literal fills the rows of the literal
    ahead (up to CHAIN_AHEAD of them, and not past the literal's end or a row known already);
    every cell of every row then equals the automaton's own step."""
    from ministruct.engine.table import CHAIN_AHEAD

    word = "abcdefghijklmnopqrstuvwxyz" * 2
    a, tr, bc = _transitions(f'root ::= "{word}" [0-9]+ | "ab" "x" "yz"\n')
    s = tr.get(tr.intern(a.initial), int(bc[ord("a")]))
    s = tr.get(s, int(bc[ord("b")]))  # (the options' shared "ab": then two edges, no chain)
    assert [len(a.byte_edges[st[-1]]) for st in tr.configs[s]] == [2]
    s = tr.get(s, int(bc[ord("c")]))
    assert len(tr.configs[s]) == 1 and not tr.complete[s]
    tr.fill_row(s)
    along = [s]
    for ch in word[3:]:
        along.append(int(tr.table[along[-1], int(bc[ord(ch)])]))
        if not tr.complete[along[-1]]:
            break
    assert len(along) - 1 == CHAIN_AHEAD  # the filled rows, and the first one left unknown
    tr.fill_row(along[-1])  # the rest of the literal, up to its end
    for cid in range(1, len(tr)):
        if tr.complete[cid]:
            for c in range(tr.n_classes):
                want = a.step(tr.configs[cid], int(tr.class_rep[c]))
                assert tr.configs[int(tr.table[cid, c])] == want, (tr.configs[cid], c)
    end = tr.step_bytes(s, word[3:].encode())
    assert end != DEAD and not a.is_accepting(tr.configs[end])
    assert a.is_accepting(tr.configs[tr.step_bytes(end, b"42")])
    assert tr.step_bytes(end, b"x") == DEAD
