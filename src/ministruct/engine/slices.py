"""Vocabulary slices: per vocabulary, the tokens made only of characters of a common set.

Inside a JSON string almost every token is legal, and walking the whole trie to say so
costs milliseconds on a 262k vocabulary. A slice names a character set S (the JSON
string character: any code point but U+0000-U+001F, '"' and '\\') and holds, built once
per vocabulary: `length[t]`, the number of characters of token t when its bytes are
whole UTF-8 characters all in S (else NOT_IN), and the trie of every other token (the
*rest*). Where the grammar takes any character of S from one parser state to one next
state (compile.py checks this), the tokens of the slice are decided by their length
alone, and only the rest needs walking.

`index_for(vocab)` builds or loads the vocabulary's trie and slices (disk cache, memory
mapped) once per process.
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass

import numpy as np

from .trie import TokenTrie
from .vocab import Vocabulary

NOT_IN = np.iinfo(np.int16).max
SLICES: dict[str, tuple[tuple[int, int], ...]] = {
    "json-char": ((0x20, 0x21), (0x23, 0x5B), (0x5D, 0x10FFFF)),
}


@dataclass(frozen=True)
class Slice:
    name: str
    ranges: tuple[tuple[int, int], ...]  # code points of S
    length: np.ndarray                  # int16 per logits row: characters, NOT_IN outside the slice
    rest: TokenTrie                     # the text tokens outside the slice

    def members(self, max_chars: int | None = None) -> np.ndarray:
        """bool per logits row: the slice's tokens (with at most `max_chars` characters)."""
        if max_chars is None:
            return self.length != NOT_IN
        return self.length <= max_chars


@dataclass(frozen=True)
class VocabIndex:
    trie: TokenTrie
    slices: dict[str, Slice]


def slice_lengths(vocab: Vocabulary, ranges: tuple[tuple[int, int], ...]) -> np.ndarray:
    """int16 per logits row: characters of each token made of whole characters in `ranges`."""
    cls = "".join(f"{re.escape(chr(a))}-{re.escape(chr(b))}" for a, b in ranges if not 0xD800 <= a <= 0xDFFF)
    whole = re.compile(f"[{cls}]+")
    out = np.full(vocab.n_logits, NOT_IN, dtype=np.int16)
    for i in vocab.text_ids.tolist():
        try:
            text = vocab.tokens[i].decode("utf-8")
        except UnicodeDecodeError:
            continue
        if whole.fullmatch(text):
            out[i] = min(len(text), NOT_IN - 1)
    return out


def build_index(vocab: Vocabulary) -> VocabIndex:
    tokens = list(vocab.tokens)
    ids = vocab.text_ids
    slices = {}
    for name, ranges in SLICES.items():
        length = slice_lengths(vocab, ranges)
        rest = ids[length[ids] == NOT_IN]
        slices[name] = Slice(name, ranges, length, TokenTrie.build(tokens, rest))
    return VocabIndex(TokenTrie.build(tokens, ids), slices)


def _to_arrays(index: VocabIndex) -> dict[str, np.ndarray]:
    arrays = index.trie.to_arrays("trie.")
    for name, s in index.slices.items():
        arrays[f"{name}.length"] = s.length
        arrays.update(s.rest.to_arrays(f"{name}.rest."))
    return arrays


def _from_arrays(arrays: dict[str, np.ndarray], n_logits: int) -> VocabIndex:
    slices = {}
    for name, ranges in SLICES.items():
        length = arrays[f"{name}.length"]
        if length.shape != (n_logits,) or length.dtype != np.int16:
            raise ValueError("slice of the wrong size")
        slices[name] = Slice(name, ranges, length, TokenTrie.from_arrays(arrays, f"{name}.rest."))
    return VocabIndex(TokenTrie.from_arrays(arrays, "trie."), slices)


_INDEX: dict[str, VocabIndex] = {}
_LOCK = threading.Lock()


def index_for(vocab: Vocabulary) -> VocabIndex:
    """The vocabulary's trie and slices: memoized in the process, cached on disk."""
    from . import cache

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
                    hit = _from_arrays(entry.arrays, vocab.n_logits)
                except (KeyError, ValueError, TypeError):
                    cache.discard("trie", disk_key)
            if hit is None:
                hit = build_index(vocab)
                cache.save("trie", disk_key, _to_arrays(hit), {"vocab": key})
            _INDEX[key] = hit
    return hit


def trie_for(vocab: Vocabulary) -> TokenTrie:
    """The trie of every text token of the vocabulary."""
    return index_for(vocab).trie


# ---------------------------------------------------------------- per grammar: where a slice applies

INFINITE = -1


class SliceChains:
    """Which configurations a slice decides, and up to how many characters.

    A configuration C qualifies when every character of S takes C to one same next
    configuration C1 (DEAD included), C1 to one C2, and so on, with no C_j holding
    ACCEPT (the frame could return mid-token and continue below: the walk must see it).
    A slice token of c characters is then legal from C exactly when C_1..C_c are alive:
    `limit(C)` is the count of alive steps (INFINITE when the chain cycles or outlasts
    the longest token), or None when C does not qualify.
    """

    def __init__(self, sl: Slice, tr, byte_class: np.ndarray, max_chars: int) -> None:
        from .utf8 import utf8_sequences

        self.slice = sl
        self.tr = tr
        self.max_chars = max_chars
        self.seqs = [
            tuple(tuple(sorted(set(byte_class[lo:hi + 1].tolist()))) for lo, hi in seq)
            for seq in utf8_sequences(sl.ranges)
        ]
        self._next: dict[int, int | None] = {}
        self._limit: dict[int, int | None] = {}

    def char_step(self, cid: int) -> int | None:
        """The one configuration every character of S leads `cid` to, None when they differ."""
        if cid in self._next:
            return self._next[cid]
        get = self.tr.get
        target: int | None = None
        for seq in self.seqs:
            cur = {cid}
            for classes in seq:
                cur = {get(s, c) for s in cur for c in classes}
                if len(cur) > 1:
                    break
            if len(cur) != 1 or (target is not None and target not in cur):
                target = None
                break
            target = next(iter(cur))
        self._next[cid] = target
        return target

    def limit(self, cid: int) -> int | None:
        if cid in self._limit:
            return self._limit[cid]
        seen = {cid}
        x, r, out = cid, 0, None
        while True:
            y = self.char_step(x)
            if y is None or (y != 0 and self.tr.accept[y]):
                out = None
                break
            if y == 0:  # DEAD
                out = r
                break
            r += 1
            if y in seen or r > self.max_chars:
                out = INFINITE
                break
            seen.add(y)
            x = y
        self._limit[cid] = out
        return out
