"""A vocabulary's text tokens as a level-by-level byte trie in flat numpy arrays.

Level d holds one node per distinct d-byte token prefix. Nodes of a level are in
sorted order, so the children of any node form one contiguous run of the next
level: a walk can expand the live nodes of a level with a few vectorized calls.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .vocab import Vocabulary


@dataclass
class TokenTrie:
    """Flat trie; index 0 of every per-level list is the root level (one node)."""

    node_byte: list[np.ndarray]      # level d: the byte that leads into each node (uint8)
    parent: list[np.ndarray]         # level d: the parent's index in level d-1
    child_start: list[np.ndarray]    # level d: first child (index into level d+1)
    child_count: list[np.ndarray]    # level d: number of children
    end_ids: list[np.ndarray]        # level d: ids of tokens whose bytes end at this level
    end_node: list[np.ndarray]       # level d: the node each of those tokens ends at
    n_nodes: int
    max_len: int

    @classmethod
    def build(cls, vocab: Vocabulary) -> "TokenTrie":
        ids = vocab.text_ids
        toks = [vocab.tokens[i] for i in ids]
        order = sorted(range(len(toks)), key=toks.__getitem__)
        ids = ids[np.asarray(order, dtype=np.int64)] if len(order) else ids
        toks = [toks[i] for i in order]
        n = len(toks)
        lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=n)
        L = int(lens.max()) if n else 0
        mat = np.zeros((n, max(L, 1)), dtype=np.uint8)
        if n:
            flat = np.frombuffer(b"".join(toks), dtype=np.uint8)
            rows = np.repeat(np.arange(n), lens)
            starts = np.cumsum(lens) - lens
            cols = np.arange(len(flat)) - np.repeat(starts, lens)
            mat[rows, cols] = flat
        # lcp[i]: common prefix length of token i with token i-1 in sorted order
        lcp = np.zeros(n, dtype=np.int64)
        if n > 1:
            both = np.minimum(lens[1:], lens[:-1])
            eq = mat[1:] == mat[:-1]
            eq &= np.arange(mat.shape[1])[None, :] < both[:, None]
            lcp[1:] = np.where(eq.all(axis=1), mat.shape[1], eq.argmin(axis=1))
            del eq
        node_byte = [np.zeros(1, dtype=np.uint8)]
        parents: list[np.ndarray] = [np.zeros(0, dtype=np.int64)]
        end_ids = [np.zeros(0, dtype=np.int32)]
        end_node = [np.zeros(0, dtype=np.int64)]
        prev_node_of = np.zeros(n, dtype=np.int64)  # every token sits under the root
        active = np.arange(n)
        for d in range(1, L + 1):
            active = active[lens[active] >= d]
            new = lcp[active] < d
            node_of = np.cumsum(new) - 1
            first = active[new]
            node_byte.append(mat[first, d - 1])
            parents.append(prev_node_of[first])
            ending = lens[active] == d
            end_ids.append(ids[active[ending]].astype(np.int32))
            end_node.append(node_of[ending])
            nxt = np.zeros(n, dtype=np.int64)
            nxt[active] = node_of
            prev_node_of = nxt
        child_start, child_count = _child_ranges(parents, [len(b) for b in node_byte])
        return cls(
            node_byte=node_byte,
            parent=parents,
            child_start=child_start,
            child_count=child_count,
            end_ids=end_ids,
            end_node=end_node,
            n_nodes=sum(len(b) for b in node_byte),
            max_len=L,
        )


def _child_ranges(parent: list[np.ndarray], sizes: list[int]) -> tuple[list[np.ndarray], list[np.ndarray]]:
    """Per level, each node's first child and child count (children are contiguous
    because `parent[d + 1]` is sorted)."""
    starts, counts = [], []
    for d, n_here in enumerate(sizes):
        if d + 1 < len(sizes):
            par = parent[d + 1]
            start = np.searchsorted(par, np.arange(n_here), side="left")
            stop = np.searchsorted(par, np.arange(n_here), side="right")
        else:
            start = stop = np.zeros(n_here, dtype=np.int64)
        starts.append(start.astype(np.int64))
        counts.append((stop - start).astype(np.int64))
    return starts, counts


def expand_children(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenate the index ranges [start[i], start[i] + count[i]) (vectorized)."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(count) - count
    return np.repeat(start - offsets, count) + np.arange(total)


_TRIES: dict[str, TokenTrie] = {}


def trie_for(vocab: Vocabulary) -> TokenTrie:
    """The trie of a vocabulary: memoized in the process and cached on disk."""
    from . import cache

    key = vocab.fingerprint
    hit = _TRIES.get(key)
    if hit is None:
        disk_key = cache.trie_key(key)
        hit = cache.load("trie", disk_key)
        if not isinstance(hit, TokenTrie):
            hit = TokenTrie.build(vocab)
            cache.save("trie", disk_key, hit)
        _TRIES[key] = hit
    return hit


@dataclass
class ClassTrie:
    """The byte trie with bytes replaced by a grammar's byte classes and equal paths merged.

    Tokens whose bytes fall in the same classes position by position behave the same
    in every configuration, so one walk of this smaller trie decides them all.
    """

    node_class: list[np.ndarray]
    parent: list[np.ndarray]
    child_start: list[np.ndarray]
    child_count: list[np.ndarray]
    end_ids: list[np.ndarray]
    end_node: list[np.ndarray]
    n_nodes: int
    max_len: int

    @classmethod
    def build(cls, trie: TokenTrie, byte_class: np.ndarray, n_classes: int) -> "ClassTrie":
        node_class = [np.zeros(1, dtype=np.int64)]
        parent = [np.zeros(0, dtype=np.int64)]
        end_node = [np.zeros(0, dtype=np.int64)]
        prev = np.zeros(1, dtype=np.int64)  # byte node -> merged node, previous level
        for d in range(1, trie.max_len + 1):
            key = prev[trie.parent[d]] * n_classes + byte_class[trie.node_byte[d]]
            uniq, inv = np.unique(key, return_inverse=True)
            node_class.append(uniq % n_classes)
            parent.append(uniq // n_classes)
            end_node.append(inv[trie.end_node[d]])
            prev = inv
        child_start, child_count = _child_ranges(parent, [len(c) for c in node_class])
        return cls(
            node_class=node_class,
            parent=parent,
            child_start=child_start,
            child_count=child_count,
            end_ids=trie.end_ids,
            end_node=end_node,
            n_nodes=sum(len(c) for c in node_class),
            max_len=trie.max_len,
        )
