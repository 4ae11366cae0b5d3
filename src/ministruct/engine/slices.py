"""Vocabulary slices: per vocabulary, the tokens made only of characters of a common set.

Inside a JSON string almost every token is legal, and walking the whole trie to say so
costs milliseconds on a 262k vocabulary. A slice names a character set S (the JSON
string character: any code point but U+0000-U+001F, '"' and '\\') and holds, built once
per vocabulary: `length[t]`, the number of characters of token t when its bytes are
whole UTF-8 characters all in S, at most MAX_SLICE_CHARS of them (else NOT_IN), and the
trie of every other token (the *rest*). Where the grammar takes any character of S from one parser state to one next
state (chains.py checks this), the tokens of the slice are decided by their length
alone, and only the rest needs walking.

`index_for(vocab)` builds or loads the vocabulary's trie and slices (disk cache, memory
mapped) once per process.
"""

from __future__ import annotations

import re
import threading
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from typing import Any, Callable, TypeVar

import numpy as np

from ministruct.engine.trie import TokenTrie, expand_children
from ministruct.engine.utf8 import utf8_sequences
from ministruct.engine.vocab import Vocabulary

T = TypeVar("T")

NOT_IN = np.iinfo(np.int16).max
_SLICE_ARRAYS = ("ascii_ids", "ascii_bits", "wide_ids", "wide_starts", "wide_cps", "suffix_ok", "need_walk")
MAX_SUFFIX_DEPTH = 64  # suffixes starting this deep in a token are never taken by a slice
# longer tokens stay with the rest (none in the bundled vocabularies: their longest runs of
# dashes or spaces have 80 and 31); a chain is followed at most one step past the slice's
# longest token (SliceChains.max_chars), whatever the length of a bounded string
MAX_SLICE_CHARS = 256
SLICES: dict[str, tuple[tuple[int, int], ...]] = {
    "json-char": ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)),
    "word": ((0x30, 0x39), (0x41, 0x5A), (0x5F, 0x5F), (0x61, 0x7A)),  # only for walk cuts (prune.py)
}
CHAIN_SLICES = ("json-char",)  # the slices whose tokens are taken by length (SliceChains)
OPEN_SLICE = "json-char"  # the slice open chains take tokens from (SliceChains.open_limit)
# character sets whose rest trie (`rest_outside`) is built with the vocabulary's index and
# cached on disk beside it: an open chain over the ASCII letters and more (an e-mail's local
# part, a host name's labels) walks it from its first step instead of building it first
# (26 ms on a 262k vocabulary; 21 MB on disk)
INDEXED_OUTSIDE = (((0x41, 0x5A), (0x61, 0x7A)),)


@dataclass(frozen=True)
class Slice:
    name: str
    ranges: tuple[tuple[int, int], ...]  # code points of S
    length: np.ndarray  # int16 per logits row: characters, NOT_IN outside the slice
    rest: TokenTrie  # the text tokens outside the slice
    ascii_ids: np.ndarray  # int32: the slice's all-ASCII tokens ...
    ascii_bits: np.ndarray  # uint64 (n, 2): ... the set of their characters
    wide_ids: np.ndarray  # int32: the slice's other tokens ...
    wide_starts: np.ndarray  # int64: ... where each one's code points start in `wide_cps`
    wide_cps: np.ndarray  # int32: their code points, token after token
    suffix_ok: np.ndarray  # uint64 per token of the full trie (byte order): bit d set
    #                                     when the token's bytes from d on are whole characters of S
    need_walk: np.ndarray  # bool per node of the full trie: some longer token below
    #                                     it is not whole characters of S from the node's depth on
    vocab: str = ""  # the vocabulary's fingerprint: `lengths_within` keeps its sets on disk under it

    @cached_property
    def max_chars(self) -> int:
        """The characters of the slice's longest token."""
        return int(np.max(self.length, where=self.length != NOT_IN, initial=0))


@dataclass(frozen=True)
class VocabIndex:
    trie: TokenTrie
    slices: dict[str, Slice]
    # the arrays of `rest_outside` for each set of INDEXED_OUTSIDE (a trie made of them,
    # checked, on first use: `rest_outside_kept`)
    outside: dict[tuple[tuple[int, int], ...], dict[str, np.ndarray]] = field(default_factory=dict)


def _class_pattern(ranges: tuple[tuple[int, int], ...]) -> str:
    parts = (f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges if not 0xD800 <= a <= 0xDFFF)
    return "[" + "".join(parts) + "]"


def slice_lengths(vocab: Vocabulary, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """int16 per logits row: characters of each token made of whole characters in `ranges`,
    NOT_IN for the others."""
    whole = re.compile(_class_pattern(ranges) + "+")
    out = np.full(vocab.n_logits, NOT_IN, dtype=np.int16)
    for i in vocab.text_ids.tolist():
        try:
            text = vocab.tokens[i].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if len(text) <= MAX_SLICE_CHARS and whole.fullmatch(text):
            out[i] = len(text)
    return out


def suffix_bits(tokens: list[bytes], ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """uint64 per token: bit d set when token[d:] is one or more whole characters in `ranges`."""
    one = re.compile(_class_pattern(ranges))
    out = np.zeros(len(tokens), dtype=np.uint64)
    for k, t in enumerate(tokens):
        bits, p = 0, len(t)
        while p > 0:  # from the end, one whole character at a time
            q = p - 1
            while q > 0 and p - q < 4 and t[q] & 0xC0 == 0x80:
                q -= 1
            try:
                ch = t[q:p].decode("utf-8")
            except UnicodeDecodeError:
                break
            if not one.fullmatch(ch):
                break
            if q < MAX_SUFFIX_DEPTH:
                bits |= 1 << q
            p = q
        out[k] = bits
    return out


def need_walk(trie: TokenTrie, suffix_ok: np.ndarray) -> np.ndarray:
    """bool per node: a token below it, longer than the node's depth, is not whole
    characters of the slice from that depth on (so the node's subtree must be walked)."""
    out = np.ones(trie.n_nodes, dtype=bool)
    for d in range(min(trie.max_len, MAX_SUFFIX_DEPTH - 1) + 1):
        bad = (trie.sorted_len > d) & (((suffix_ok >> np.uint64(d)) & np.uint64(1)) == 0)
        cs = np.concatenate(([0], np.cumsum(bad, dtype=np.int64)))
        a, b = int(trie.level_start[d]), int(trie.level_start[d + 1])
        lo = trie.tok_lo[a:b].astype(np.int64)
        out[a:b] = cs[lo + trie.tok_count[a:b]] > cs[lo]
    return out


def _slice(
    vocab: Vocabulary, tokens: list[bytes], name: str, ranges: tuple[tuple[int, int], ...], full: TokenTrie
) -> Slice:
    length = slice_lengths(vocab, ranges)
    ids = vocab.text_ids
    ascii_ids, bits, wide_ids, wide = [], [], [], []
    for i in ids[length[ids] != NOT_IN].tolist():
        t = tokens[i]
        if t.isascii():
            mask = 0
            for b in set(t):
                mask |= 1 << b
            ascii_ids.append(i)
            bits.append((mask & (2**64 - 1), mask >> 64))
        else:
            wide_ids.append(i)
            wide.append(t.decode("utf-8").encode("utf-32-le"))
    counts = np.asarray([len(w) // 4 for w in wide], dtype=np.int64)
    rest = TokenTrie.build(tokens, ids[length[ids] == NOT_IN])
    suffix = suffix_bits([tokens[i] for i in full.sorted_ids.tolist()], ranges)
    return Slice(
        name,
        ranges,
        length,
        rest,
        np.asarray(ascii_ids, dtype=np.int32),
        np.asarray(bits, dtype=np.uint64).reshape(-1, 2),
        np.asarray(wide_ids, dtype=np.int32),
        np.cumsum(counts) - counts,
        np.frombuffer(b"".join(wide), dtype=np.int32).copy(),
        suffix,
        need_walk(full, suffix),
        vocab.fingerprint,
    )


def build_index(vocab: Vocabulary) -> VocabIndex:
    tokens = list(vocab.tokens)
    full = TokenTrie.build(tokens, vocab.text_ids)
    slices = {name: _slice(vocab, tokens, name, ranges, full) for name, ranges in SLICES.items()}
    outside = {r: _outside(slices[OPEN_SLICE], r, full).to_arrays("") for r in INDEXED_OUTSIDE}
    return VocabIndex(full, slices, outside)


def _to_arrays(index: VocabIndex) -> dict[str, np.ndarray]:
    arrays = index.trie.to_arrays("trie.")
    for name, s in index.slices.items():
        arrays[f"{name}.length"] = s.length
        for f in _SLICE_ARRAYS:
            arrays[f"{name}.{f}"] = getattr(s, f)
        arrays.update(s.rest.to_arrays(f"{name}.rest."))
    for k, r in enumerate(INDEXED_OUTSIDE):
        arrays.update({f"outside{k}.{f}": a for f, a in index.outside[r].items()})
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray], n_logits: int, fingerprint: str = "") -> VocabIndex:
    slices = {}
    for name, ranges in SLICES.items():
        length = arrays[f"{name}.length"]
        if length.shape != (n_logits,) or length.dtype != np.int16:
            raise ValueError("slice of the wrong size")
        parts = {f: arrays[f"{name}.{f}"] for f in _SLICE_ARRAYS}
        ids = np.concatenate([parts["ascii_ids"], parts["wide_ids"]])
        starts = parts["wide_starts"]
        if len(ids) and (ids.min() < 0 or ids.max() >= n_logits):
            raise ValueError("slice token ids out of range")
        if parts["ascii_bits"].shape != (len(parts["ascii_ids"]), 2) or len(starts) != len(parts["wide_ids"]):
            raise ValueError("slice arrays do not fit together")
        if len(starts) and (starts.min() < 0 or starts.max() >= len(parts["wide_cps"])):
            raise ValueError("slice code points do not fit")
        rest = TokenTrie.from_arrays(arrays, f"{name}.rest.")
        slices[name] = Slice(name, ranges, length, rest, **parts, vocab=fingerprint)
    full = TokenTrie.from_arrays(arrays, "trie.")
    for sl in slices.values():
        if len(sl.suffix_ok) != len(full.sorted_ids) or len(sl.need_walk) != full.n_nodes:
            raise ValueError("slice does not fit the trie")
    outside = {}
    for k, r in enumerate(INDEXED_OUTSIDE):
        prefix = f"outside{k}."
        outside[r] = {name[len(prefix) :]: a for name, a in arrays.items() if name.startswith(prefix)}
    return VocabIndex(full, slices, outside)


_INDEX: dict[str, VocabIndex] = {}
_LOCK = threading.Lock()


def index_for(vocab: Vocabulary) -> VocabIndex:
    """The vocabulary's trie and slices: memoized in the process, cached on disk."""
    from ministruct.engine import cache

    key = vocab.fingerprint
    hit = _INDEX.get(key)
    if hit is not None:
        return hit
    with _LOCK:
        hit = _INDEX.get(key)
        if hit is None:
            disk_key = cache.trie_key(key)
            entry = cache.load("trie", disk_key)
            if entry is not None:
                try:
                    hit = _from_arrays(entry.arrays, vocab.n_logits, key)
                except (KeyError, ValueError, TypeError):
                    cache.discard("trie", disk_key)
            if hit is None:
                hit = build_index(vocab)
                arrays = _to_arrays(hit)
                cache.save("trie", disk_key, arrays, {"vocab": key})
                for a in arrays.values():  # read-only, as when loaded from the cache
                    a.setflags(write=False)
            _INDEX[key] = hit
    return hit


def tokens_by_first_byte(trie: TokenTrie) -> np.ndarray:
    """int64 per byte value: how many tokens begin with it (the root's children's counts)."""
    root = int(trie.child_start[0])
    nodes = np.arange(root, root + int(trie.child_count[0]))
    out = np.zeros(256, dtype=np.int64)
    out[trie.node_byte[nodes]] = trie.tok_count[nodes]
    return out


def tokens_starting_in(trie: TokenTrie, ranges: tuple[tuple[int, int], ...]) -> int:
    """How many tokens begin with a first byte of a character in `ranges` (at least as
    many as the tokens whose first character is in `ranges`)."""
    first = np.zeros(256, dtype=bool)
    for seq in utf8_sequences(ranges):
        first[seq[0][0] : seq[0][1] + 1] = True
    return int(tokens_by_first_byte(trie)[first].sum())


_LENGTHS: OrderedDict[tuple[int, tuple], tuple[Slice, np.ndarray]] = OrderedDict()
_LENGTHS_KEPT = 64  # alive sets per process (each an int16 per logits row)
_LENGTHS_LOCK = threading.Lock()


def lengths_within(sl: Slice, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """`sl.length`, kept only for the tokens whose characters are all in `ranges` (read-only;
    kept per process and on disk, shared by every grammar on the vocabulary: character
    classes repeat, and a set costs 0.5-1.5 ms to find on a 262k vocabulary, about 0.35 to load)."""
    return _kept(_LENGTHS, _LENGTHS_KEPT, sl, ranges, lambda: _lengths_on_disk(sl, ranges))


def lengths_known(sl: Slice, ranges: tuple[tuple[int, int], ...]) -> bool:
    """Does this process hold `lengths_within(sl, ranges)` already?"""
    return _kept_already(_LENGTHS, sl, ranges) is not None


def _lengths_on_disk(sl: Slice, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    from ministruct.engine import cache

    if not sl.vocab:
        return _read_only(_lengths_within(sl, ranges))
    key = cache.lengths_key(sl.vocab, sl.name, ranges)
    entry = cache.load("lengths", key)
    if entry is not None:
        out = entry.arrays.get("length")
        if out is not None and out.shape == sl.length.shape and out.dtype == np.int16:
            return out
        cache.discard("lengths", key)
    out = _read_only(_lengths_within(sl, ranges))
    cache.save("lengths", key, {"length": out})
    return out


def _read_only(a: np.ndarray) -> np.ndarray:
    a.setflags(write=False)
    return a


def _kept(store: OrderedDict, most: int, owner: Any, ranges: tuple, build: Callable[[], T]) -> T:
    """`build()`, kept per process under (owner, ranges), the `most` latest used."""
    hit = _kept_already(store, owner, ranges)
    if hit is not None:
        return hit
    out = build()
    with _LENGTHS_LOCK:
        store[(id(owner), ranges)] = (owner, out)
        while len(store) > most:
            store.popitem(last=False)
    return out


def _lengths_within(sl: Slice, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    top = max((b for _, b in ranges), default=-1)
    lut = np.zeros(top + 2, dtype=bool)  # (the last entry stands for every code point above)
    for a, b in ranges:
        lut[a : b + 1] = True
    ascii_lut = np.zeros(128, dtype=bool)
    ascii_lut[: min(len(lut), 128)] = lut[:128]
    outside = ~np.packbits(ascii_lut, bitorder="little").view(np.uint64)  # the ASCII part as 2 words
    bits = sl.ascii_bits
    fits = ((bits[:, 0] & outside[0]) | (bits[:, 1] & outside[1])) == 0  # (10x `.all(axis=1)` on 2 columns)
    out = np.full(len(sl.length), NOT_IN, dtype=np.int16)
    ids = np.compress(fits, sl.ascii_ids)  # (7x `sl.ascii_ids[fits]`: 0.07 against 0.5 ms on 142,000 tokens)
    out[ids] = sl.length[ids]
    if len(sl.wide_ids) and top >= 0x80:  # (every wide token has a character past ASCII)
        starts = sl.wide_starts
        ends = np.append(starts[1:], len(sl.wide_cps))
        # a token whose first character is outside cannot fit: look further only at the rest
        cand = np.flatnonzero(lut[np.minimum(sl.wide_cps[starts], top + 1)])
        if len(cand):
            counts = ends[cand] - starts[cand]
            cps = np.minimum(sl.wide_cps[expand_children(starts[cand], counts)], top + 1)
            outside = np.logical_or.reduceat(~lut[cps], np.cumsum(counts) - counts)
            ids = sl.wide_ids[np.compress(~outside, cand)]
            out[ids] = sl.length[ids]
    return out


_OUTSIDE: OrderedDict[tuple[int, tuple], tuple[TokenTrie, TokenTrie]] = OrderedDict()
_OUTSIDE_KEPT = 8  # tries per process (each up to the size of the full trie)


def rest_outside(sl: Slice, ranges: tuple[tuple[int, int], ...], full: TokenTrie) -> TokenTrie:
    """The trie of the tokens of `full` that `lengths_within(sl, ranges)` does not hold: the
    ones an open chain (`SliceChains.open_limit`) does not decide by length (kept per process)."""

    def build() -> TokenTrie:
        out = _outside(sl, ranges, full)
        for a in out.to_arrays("").values():  # (read-only as the cached tries: the same compiled walk)
            a.setflags(write=False)
        return out

    return _kept(_OUTSIDE, _OUTSIDE_KEPT, full, ranges, build)


def _outside(sl: Slice, ranges: tuple[tuple[int, int], ...], full: TokenTrie) -> TokenTrie:
    """The trie of the tokens of `full` that `lengths_within(sl, ranges)` does not hold."""
    return full.subset(lengths_within(sl, ranges) == NOT_IN)


def rest_outside_kept(ranges: tuple[tuple[int, int], ...], index: VocabIndex) -> TokenTrie | None:
    """`rest_outside` when this process has it already or the index holds it
    (INDEXED_OUTSIDE), else None."""
    hit = _kept_already(_OUTSIDE, index.trie, ranges)
    if hit is None and ranges in index.outside:
        arrays = index.outside[ranges]
        hit = _kept(_OUTSIDE, _OUTSIDE_KEPT, index.trie, ranges, lambda: TokenTrie.from_arrays(arrays, ""))
    return hit


def _kept_already(store: OrderedDict, owner: Any, ranges: tuple) -> Any:
    """What `_kept` holds for (owner, ranges), else None (an id can be reused once its
    owner is gone: the owner itself is kept beside and compared)."""
    key = (id(owner), ranges)
    with _LENGTHS_LOCK:
        hit = store.get(key)
        if hit is None or hit[0] is not owner:
            return None
        store.move_to_end(key)
        return hit[1]
