"""A vocabulary's text tokens as a byte trie in flat numpy arrays, built once per vocabulary.

Nodes are numbered level by level (the root is node 0), sorted within a level, so the
children of any node are one contiguous run of ids: a walk expands a whole set of
live nodes with a few vectorized calls (the numpy walk). The same nodes are also listed
in preorder (`pre`), where every subtree is one run of rows: the compiled walk goes
through them in memory order and skips a dead node's subtree in one step. Token ids hang
on the node where their bytes end; tokens with the same bytes as an earlier one are
listed as duplicates.

`index_for(vocab)` gives the trie of every text token plus the vocabulary slices
(slices.py), from the disk cache when it is there (memory-mapped, read on use).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

_FIELDS = (
    "node_byte",
    "child_start",
    "child_count",
    "node_token",
    "dup_src",
    "dup_dst",
    "level_start",
    "tok_lo",
    "tok_count",
    "sorted_ids",
    "sorted_len",
    "pre",
    "node_pre",
)
# columns of TokenTrie.pre, one row per node in preorder
PRE_DEPTH_BYTE, PRE_TOKEN, PRE_SIZE, PRE_NODE = 0, 1, 2, 3


@dataclass(frozen=True)
class TokenTrie:
    """Flat trie. node 0 is the root; `node_token[n]` is the token ending at n or -1."""

    node_byte: np.ndarray  # uint8: the byte leading into each node
    child_start: np.ndarray  # int32: first child's node id
    child_count: np.ndarray  # int32: number of children
    node_token: np.ndarray  # int32: token whose bytes end here (-1: none)
    dup_src: np.ndarray  # int32: a token id that has a node ...
    dup_dst: np.ndarray  # int32: ... and another token with the same bytes
    level_start: np.ndarray  # int64: first node id of each level (depth), and the total
    tok_lo: np.ndarray  # int32: the tokens below a node are sorted_ids[tok_lo : tok_lo + tok_count]
    tok_count: np.ndarray  # int32
    sorted_ids: np.ndarray  # int32: the trie's tokens in byte order
    sorted_len: np.ndarray  # int32: their lengths in bytes
    # the same nodes in preorder (byte order: a node, then its subtree, contiguous), for
    # walks that skip a dead subtree in one step; per row: depth << 8 | byte, token,
    # subtree size (itself included), node id
    pre: np.ndarray  # int32 (n_nodes, 4)
    node_pre: np.ndarray  # int32: each node's row in `pre`
    max_len: int

    @property
    def n_nodes(self) -> int:
        return len(self.node_byte)

    @classmethod
    def build(cls, tokens: list[bytes], ids: np.ndarray) -> TokenTrie:
        """The trie of `tokens[i]` for i in `ids` (all non-empty)."""
        toks = [tokens[int(i)] for i in ids]
        order = sorted(range(len(toks)), key=toks.__getitem__)
        ids = np.asarray(ids, dtype=np.int64)[np.asarray(order, dtype=np.int64)] if order else np.zeros(0, np.int64)
        toks = [toks[i] for i in order]
        n = len(toks)
        lens = np.fromiter((len(t) for t in toks), dtype=np.int64, count=n)
        L = int(lens.max()) if n else 0
        mat = np.zeros((n, max(L, 1)), dtype=np.uint8)
        if n:
            flat = np.frombuffer(b"".join(toks), dtype=np.uint8)
            rows = np.repeat(np.arange(n), lens)
            starts = np.cumsum(lens) - lens
            mat[rows, np.arange(len(flat)) - np.repeat(starts, lens)] = flat
        lcp = np.zeros(n, dtype=np.int64)  # common prefix with the previous token
        if n > 1:
            both = np.minimum(lens[1:], lens[:-1])
            eq = mat[1:] == mat[:-1]
            eq &= np.arange(mat.shape[1])[None, :] < both[:, None]
            lcp[1:] = np.where(eq.all(axis=1), mat.shape[1], eq.argmin(axis=1))
            del eq
        level_lo = [np.zeros(1, dtype=np.int64)]
        level_count = [np.asarray([n], dtype=np.int64)]
        level_bytes = [np.zeros(1, dtype=np.uint8)]
        level_parent = [np.zeros(0, dtype=np.int64)]
        offsets = [0, 1]
        token_node = np.zeros(n, dtype=np.int64)  # global node where each token ends
        prev_node_of = np.zeros(n, dtype=np.int64)
        active = np.arange(n)
        for d in range(1, L + 1):
            active = active[lens[active] >= d]
            new = lcp[active] < d
            node_of = np.cumsum(new) - 1
            first = active[new]
            level_bytes.append(mat[first, d - 1])
            level_lo.append(first)
            level_count.append(np.bincount(node_of, minlength=len(first)))
            level_parent.append(prev_node_of[first])
            ending = lens[active] == d
            token_node[active[ending]] = node_of[ending] + offsets[-1]
            nxt = np.zeros(n, dtype=np.int64)
            nxt[active] = node_of + offsets[-1]
            prev_node_of = nxt
            offsets.append(offsets[-1] + len(first))
        total = offsets[-1]
        parent = np.concatenate(level_parent) if L else np.zeros(0, dtype=np.int64)
        # children of node p are the nodes whose parent is p: contiguous, parents sorted
        child_start = np.searchsorted(parent, np.arange(total), side="left") + 1
        child_stop = np.searchsorted(parent, np.arange(total), side="right") + 1
        node_token = np.full(total, -1, dtype=np.int32)
        # sorted order puts equal tokens side by side: the first one owns the node
        dup = np.zeros(n, dtype=bool)
        if n > 1:
            dup[1:] = (lcp[1:] >= lens[1:]) & (lens[1:] == lens[:-1])
        node_token[token_node[~dup]] = ids[~dup]
        node_byte = np.concatenate(level_bytes)
        tok_lo = np.concatenate(level_lo)
        tok_count = np.concatenate(level_count)
        pre, node_pre = _preorder(node_byte, node_token, np.diff(offsets), tok_lo, tok_count)
        return cls(
            node_byte=node_byte,
            child_start=child_start.astype(np.int32),
            child_count=(child_stop - child_start).astype(np.int32),
            node_token=node_token,
            dup_src=node_token[token_node[dup]].astype(np.int32),
            dup_dst=ids[dup].astype(np.int32),
            level_start=np.asarray(offsets, dtype=np.int64),
            tok_lo=tok_lo.astype(np.int32),
            tok_count=tok_count.astype(np.int32),
            sorted_ids=ids.astype(np.int32),
            sorted_len=lens.astype(np.int32),
            pre=pre,
            node_pre=node_pre,
            max_len=L,
        )

    def subset(self, keep: np.ndarray) -> TokenTrie:
        """The trie of this trie's tokens whose ids `keep` marks (bool per token id); the
        same as building it anew, without sorting the tokens again."""
        kept_tok = keep[self.sorted_ids]
        cs_tok = np.zeros(len(kept_tok) + 1, dtype=np.int32)
        np.cumsum(kept_tok, out=cs_tok[1:])
        tok_lo = cs_tok[self.tok_lo]
        tok_count = cs_tok[self.tok_lo + self.tok_count] - tok_lo
        alive = tok_count > 0
        alive[0] = True  # (the root, even of no tokens)
        cs_node = np.zeros(len(alive) + 1, dtype=np.int32)
        np.cumsum(alive, out=cs_node[1:])
        nodes = np.flatnonzero(alive)
        start = self.child_start[nodes]
        child_start = cs_node[start]
        child_count = cs_node[start + self.child_count[nodes]] - child_start
        node_token = self.node_token[nodes]
        has = node_token >= 0
        has[has] = ~keep[node_token[has]]
        node_token[has] = -1
        twins = keep[self.dup_dst]
        level_start = cs_node[self.level_start].astype(np.int64)
        level_start = level_start[: int(np.searchsorted(level_start, level_start[-1], side="left")) + 1]
        at = np.flatnonzero(alive[self.pre[:, PRE_NODE]])  # preorder rows kept, in order
        pre = self.pre.take(at, axis=0)
        cs_pre = np.zeros(len(self.pre) + 1, dtype=np.int32)
        cs_pre[1:][at] = 1
        np.cumsum(cs_pre, out=cs_pre)
        pre[:, PRE_SIZE] = cs_pre[at + pre[:, PRE_SIZE]] - cs_pre[at]
        pre[:, PRE_NODE] = cs_node[pre[:, PRE_NODE]]
        pre[:, PRE_TOKEN] = node_token[pre[:, PRE_NODE]]
        node_pre = np.empty(len(pre), dtype=np.int32)
        node_pre[pre[:, PRE_NODE]] = np.arange(len(pre), dtype=np.int32)
        sorted_len = self.sorted_len[kept_tok]
        return TokenTrie(
            node_byte=self.node_byte[nodes],
            child_start=child_start,
            child_count=child_count,
            node_token=node_token,
            dup_src=self.dup_src[twins],
            dup_dst=self.dup_dst[twins],
            level_start=level_start,
            tok_lo=tok_lo[nodes],
            tok_count=tok_count[nodes],
            sorted_ids=self.sorted_ids[kept_tok],
            sorted_len=sorted_len,
            pre=pre,
            node_pre=node_pre,
            max_len=int(sorted_len.max()) if len(sorted_len) else 0,
        )

    def to_arrays(self, prefix: str) -> dict[str, np.ndarray]:
        out = {f"{prefix}{f}": getattr(self, f) for f in _FIELDS}
        out[f"{prefix}max_len"] = np.asarray([self.max_len], dtype=np.int64)
        return out

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], prefix: str) -> TokenTrie:
        parts = {f: arrays[f"{prefix}{f}"] for f in _FIELDS}
        t = cls(max_len=int(arrays[f"{prefix}max_len"][0]), **parts)
        n = t.n_nodes
        sizes = {len(t.child_start), len(t.child_count), len(t.node_token), len(t.tok_lo), len(t.tok_count), n}
        if len(sizes) != 1:
            raise ValueError("trie arrays of different lengths")
        if t.pre.shape != (n, 4) or len(t.node_pre) != n:
            raise ValueError("trie arrays of different lengths")
        if len(t.dup_src) != len(t.dup_dst) or len(t.sorted_ids) != len(t.sorted_len):
            raise ValueError("trie arrays of different lengths")
        if n and ((t.child_count > n - t.child_start).any() or t.child_start.min() < 0):  # (no int64 copy)
            raise ValueError("trie children out of range")
        return t


def _preorder(
    node_byte: np.ndarray, node_token: np.ndarray, level_sizes: np.ndarray, tok_lo: np.ndarray, tok_count: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """(`pre`, `node_pre`) of TokenTrie. A node comes before its subtree and after every
    node whose tokens sort before its own, so preorder is the order of (first token below
    the node, depth); a subtree ends where the first token past the node's own tokens starts."""
    total = len(node_byte)
    depth = np.repeat(np.arange(len(level_sizes)), level_sizes)
    order = np.lexsort((depth, tok_lo))
    first = tok_lo[order]
    size = np.searchsorted(first, (tok_lo + tok_count)[order], side="left") - np.arange(total)
    pre = np.empty((total, 4), dtype=np.int32)
    pre[:, PRE_DEPTH_BYTE] = (depth[order] << 8) | node_byte[order]
    pre[:, PRE_TOKEN] = node_token[order]
    pre[:, PRE_SIZE] = np.maximum(size, 1)  # (a root without tokens is a subtree of one)
    pre[:, PRE_NODE] = order
    node_pre = np.empty(total, dtype=np.int32)
    node_pre[order] = np.arange(total, dtype=np.int32)
    return pre, node_pre


def expand_children(start: np.ndarray, count: np.ndarray) -> np.ndarray:
    """Concatenate the index ranges [start[i], start[i] + count[i]) (vectorized)."""
    total = int(count.sum())
    if total == 0:
        return np.zeros(0, dtype=np.int64)
    offsets = np.cumsum(count) - count
    return np.repeat(start.astype(np.int64) - offsets, count) + np.arange(total)


def copy_duplicates(trie: TokenTrie, out: np.ndarray) -> None:
    """Give every duplicate token the value its twin got (masks and targets)."""
    if not len(trie.dup_dst):
        return
    if out.dtype == bool:  # (a mask starts all False: writing only the True ones leaves untouched pages alone)
        out[trie.dup_dst[out[trie.dup_src]]] = True
    else:
        out[trie.dup_dst] = out[trie.dup_src]
