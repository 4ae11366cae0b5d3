"""The token trie's two node orders (engine/trie.py) against a plain recursive reading."""

from __future__ import annotations

import numpy as np
from hypothesis import given, settings
from hypothesis import strategies as st

from ministruct.engine.trie import PRE_DEPTH_BYTE, PRE_NODE, PRE_SIZE, PRE_TOKEN, TokenTrie

token_sets = st.lists(st.binary(min_size=1, max_size=6).filter(lambda b: b[0] < 0xF8), min_size=1, max_size=60)


def _preorder(trie: TokenTrie) -> list[tuple[int, int, int, int, int]]:
    """(node, depth, byte, token, subtree size) in preorder, from the level-order children."""
    out: list[tuple[int, int, int, int, int]] = []

    def visit(node: int, depth: int) -> int:
        row = len(out)
        out.append((node, depth, int(trie.node_byte[node]), int(trie.node_token[node]), 0))
        size = 1
        lo = int(trie.child_start[node])
        for child in range(lo, lo + int(trie.child_count[node])):
            size += visit(child, depth + 1)
        out[row] = out[row][:4] + (size,)
        return size

    visit(0, 0)
    return out


@settings(max_examples=150, deadline=None)
@given(tokens=token_sets)
def test_preorder_rows_are_the_recursive_preorder(tokens):
    trie = TokenTrie.build(tokens, np.arange(len(tokens)))
    expected = _preorder(trie)
    pre = trie.pre
    assert pre.shape == (trie.n_nodes, 4)
    assert pre[:, PRE_NODE].tolist() == [e[0] for e in expected]
    assert (pre[:, PRE_DEPTH_BYTE] >> 8).tolist() == [e[1] for e in expected]
    assert (pre[1:, PRE_DEPTH_BYTE] & 255).tolist() == [e[2] for e in expected[1:]]
    assert pre[:, PRE_TOKEN].tolist() == [e[3] for e in expected]
    assert pre[:, PRE_SIZE].tolist() == [e[4] for e in expected]
    assert trie.node_pre[pre[:, PRE_NODE]].tolist() == list(range(trie.n_nodes))


@settings(max_examples=60, deadline=None)
@given(tokens=token_sets)
def test_the_preorder_survives_the_disk_format(tokens):
    trie = TokenTrie.build(tokens, np.arange(len(tokens)))
    again = TokenTrie.from_arrays(trie.to_arrays("t_"), "t_")
    assert np.array_equal(again.pre, trie.pre) and np.array_equal(again.node_pre, trie.node_pre)


@settings(max_examples=150, deadline=None)
@given(tokens=token_sets, picks=st.lists(st.booleans(), min_size=64, max_size=64))
def test_a_subset_is_the_trie_built_of_those_tokens(tokens, picks):
    tokens = tokens + tokens[:2]  # (twins: the same bytes under two ids)
    full = TokenTrie.build(tokens, np.arange(len(tokens)))
    keep = np.asarray([picks[sum(t) % 64] for t in tokens])  # (the same for twins)
    sub = full.subset(keep)
    ref = TokenTrie.build(tokens, np.flatnonzero(keep))
    for f in ("node_byte", "child_count", "node_token", "level_start", "tok_lo", "tok_count", "sorted_ids", "pre"):
        assert np.array_equal(getattr(sub, f), getattr(ref, f)) and getattr(sub, f).dtype == getattr(ref, f).dtype, f
    assert np.array_equal(sub.node_pre, ref.node_pre) and sub.max_len == ref.max_len
    has = ref.child_count > 0  # (where a node has no children its start is never read)
    assert np.array_equal(sub.child_start[has], ref.child_start[has])
    assert sorted(zip(sub.dup_src.tolist(), sub.dup_dst.tolist())) == sorted(
        zip(ref.dup_src.tolist(), ref.dup_dst.tolist())
    )
