"""Vocabulary slices: per vocabulary, the tokens made only of characters of a common set.

Inside a JSON string almost every token is legal, and walking the whole trie to say so
costs milliseconds on a 262k vocabulary. A slice names a character set S (the JSON
string character: any code point but U+0000-U+001F, '"' and '\\') and holds, built once
per vocabulary: `length[t]`, the number of characters of token t when its bytes are
whole UTF-8 characters all in S, at most MAX_SLICE_CHARS of them (else NOT_IN), and the
trie of every other token (the *rest*). Where the grammar takes any character of S from one parser state to one next
state (compile.py checks this), the tokens of the slice are decided by their length
alone, and only the rest needs walking.

`index_for(vocab)` builds or loads the vocabulary's trie and slices (disk cache, memory
mapped) once per process.
"""

from __future__ import annotations

import re
import threading
from bisect import bisect_left, bisect_right
from collections import OrderedDict
from dataclasses import dataclass, field
from functools import cached_property
from itertools import accumulate, product
from typing import Any, Callable, Iterable, Iterator, TypeVar

import numpy as np

from ministruct.engine.automaton import ACCEPT, MAX_STACKS
from ministruct.engine.table import CELLS_MIN_STACKS
from ministruct.engine.trie import TokenTrie, expand_children
from ministruct.engine.utf8 import utf8_sequences
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.ir import normalize_ranges

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


# ---------------------------------------------------------------- per grammar: where a slice applies

INFINITE = -1


class SliceChains:
    """Which configurations a slice decides, and how.

    A configuration C qualifies when the characters of S that C can take (its *alive*
    set A) all lead to one same next configuration C1, C1's alive set is A again and
    they lead to one C2, and so on, with no C_j holding ACCEPT (a frame could return
    mid-token and continue below: the walk must see that). A slice token is then legal
    from C exactly when all its characters are in A and it has at most r of them, r =
    the number of alive steps (INFINITE when the chain cycles or outlasts the longest
    token). `limit(C)` is (r, A) with A = FULL when it is all of S, or None when C does
    not qualify.
    """

    MAX_PATHS = 512
    SEGMENTS_KEPT = 20_000

    def __init__(self, sl: Slice, tr, byte_class: np.ndarray, trie: TokenTrie, open_min_tokens: int = 0) -> None:
        self.slice = sl
        self.tr = tr
        self.max_len = trie.max_len  # nor any token more bytes: a longer uniform chain is for ever
        self.max_chars = sl.max_chars  # (a longer chain is INFINITE)
        self.open_min_tokens = open_min_tokens  # fewer tokens of a set than this: no open chain
        self.byte_seqs = utf8_sequences(sl.ranges)
        # byte classes are runs of consecutive bytes, numbered in byte order (compile.py)
        bc = byte_class.tolist()
        self.seqs = [tuple(tuple(range(bc[lo], bc[hi] + 1)) for lo, hi in seq) for seq in self.byte_seqs]
        self._one_byte_shapes_of: dict[int, list[int]] = {}  # class -> the one-byte shapes it has bytes of
        for i, seq in enumerate(self.seqs):
            if len(seq) == 1:
                for c in seq[0]:
                    self._one_byte_shapes_of.setdefault(c, []).append(i)
        self._bc = bc
        # (every one of them leads where S does: _write_cells)
        self._one_byte_classes = np.asarray(sorted(self._one_byte_shapes_of), dtype=np.int64)
        # a first byte of a character weighs the characters it starts (roughly: 1 or 64);
        # below[c] is the weight of the first bytes in classes before c
        weight = [0] * (bc[-1] + 2)
        for seq in self.byte_seqs:
            lo, hi = seq[0]
            for b in range(lo, hi + 1):
                weight[bc[b] + 1] += 1 if b < 0x80 else 64
        self.weight_below = list(accumulate(weight))
        self._weights: dict[int, int] = {}  # configuration -> _weight (char_step, weak and open_limit ask)
        one_byte = [0] * (bc[-1] + 2)  # the same for the one-byte characters only, a byte each
        for seq in self.byte_seqs:
            if len(seq) == 1:
                for b in range(seq[0][0], seq[0][1] + 1):
                    one_byte[bc[b] + 1] += 1
        self.one_byte_below = list(accumulate(one_byte))
        # the tokens whose first byte is in a class, the same way: at least as many as the
        # tokens made of any set of characters whose first bytes are in that class
        first = [0] * (bc[-1] + 2)
        for b, n in enumerate(tokens_by_first_byte(trie).tolist()):
            first[bc[b] + 1] += n
        self.tokens_below = list(accumulate(first))
        self._next: dict[int, tuple[int, tuple] | None] = {}
        self._uni: dict[int, int | None] = {}
        self._forever: dict[int, bool] = {}
        self._limit: dict[int, tuple[int, tuple] | None] = {}
        self._state_uni: dict[int, int | None] = {}
        self._state_alive: dict[int, Any] = {}
        self._ranges: dict[tuple, tuple[tuple[int, int], ...] | None] = {}
        self._segs: dict[frozenset, tuple[list[int], list[tuple[int, int, frozenset]]]] = {}
        self._open: dict[int, tuple[int, tuple] | None] = {}
        self._followed: dict[tuple[int, int], int | None] = {}
        self._state_followed: dict[tuple[int, int], int | None] = {}
        self._alive_ids: dict[tuple, int] = {}  # open chains' class paths, numbered
        self._alive_paths_of: list[tuple] = []
        self._alive_sets: list[tuple[list[int], list[tuple[int, ...]]]] = []  # (one-byte classes, longer paths)
        self._alive_classes: list[np.ndarray] = []  # the one-byte classes, as an array (_write_cells)
        self._open_hint: dict[int, int] = {}  # configuration -> the paths a chain reached it by

    def forever(self, cid: int) -> bool:
        """Does every character of S lead `cid`, and each configuration after it, to one same
        next configuration, alive and without ACCEPT, for ever (a cycle, or longer than any
        token)? Cheaper than `limit`: it gives up at the first step that is not uniform."""
        hit = self._forever.get(cid)
        if hit is not None:
            return hit
        seen = {cid}
        x, out = cid, False
        while True:
            y = self._uniform_memo(x)
            if y is None or y == DEAD_ID or self.tr.accept[y]:
                break
            y = int(self.tr.canon[y])  # (within a token, a configuration's image behaves the same)
            if y in seen or len(seen) > self.max_len:
                out = True
                break
            seen.add(y)
            x = y
        self._forever[cid] = out
        return out

    def _uniform_memo(self, cid: int) -> int | None:
        if cid not in self._uni:
            self._uni[cid] = self._uniform(cid)
        return self._uni[cid]

    def _segments(self, config: frozenset) -> tuple[list[int], list[tuple[int, int, frozenset]]]:
        """(the first classes of, the class segments) of `config`'s step (Transitions.pieces)."""
        hit = self._segs.get(config)
        if hit is None:
            cid = self.tr.ids.get(config)  # (an interned configuration's merge may be kept already)
            pieces = self.tr.pieces(config) if cid is None else self.tr.pieces_of(cid)
            if len(self._segs) >= self.SEGMENTS_KEPT:
                self._segs.clear()
            hit = self._segs[config] = ([lo for lo, _, _ in pieces], pieces)
        return hit

    def _after(self, config: frozenset, cls: int) -> frozenset:
        """The configuration after one byte of class `cls`, from class segments: the
        characters' inner configurations get no id and no table row."""
        los, pieces = self._segments(config)
        i = bisect_right(los, cls) - 1
        if i >= 0:
            lo, hi, target = pieces[i]
            if cls < hi:
                return target
        return _NOWHERE

    def _uniform_by_states(self, cid: int) -> tuple[int, tuple] | None:
        """`char_step` when each stack's top state tells where every character of S leads
        it (`_state_uniform`): (the configuration they all lead to, FULL), or (DEAD_ID,
        FULL) when none takes any; None when some top state cannot tell."""
        target = self._join_tops(cid, self._state_uniform)
        return None if target is None else (target, FULL)

    def _join_tops(self, cid: int, step_of: Callable[[int], int | None]) -> int | None:
        """The configuration `cid` goes to when each stack's top state q tells where it
        goes (`step_of(q)`: one state, or _NO_EDGE for nowhere); None when some top state
        cannot tell (`step_of` is None) or the result holds more than MAX_STACKS stacks."""
        reached: list[tuple] = []
        for st in self.tr.configs[cid]:
            if not st:
                continue  # (ACCEPT takes no input)
            t = step_of(st[-1])
            if t is None:
                return None
            if t != _NO_EDGE:
                reached.append(st[:-1] + (t,))
        return self._join(reached)

    def _uniform(self, cid: int) -> int | None:
        """The one configuration every character of S leads `cid` to, None when they differ."""
        found = self._uniform_by_states(cid)
        return self._uniform_stepped(cid) if found is None else found[0]  # (stepping names the limit)

    def _join(self, reached: list[tuple]) -> int | None:
        """The id of the configuration the `reached` stacks close to; None when it holds
        more than MAX_STACKS stacks."""
        closure = self.tr.automaton.closure
        target = frozenset().union(*(closure(st) for st in reached)) if reached else _NOWHERE
        return None if len(target) > MAX_STACKS else self.tr.intern(target)

    def _state_uniform(self, q: int) -> int | None:
        """The one state every character of S leads state q to through inner states that
        only consume (their closure is themselves); _NO_EDGE when q takes no first byte
        of any character; None when neither can be told this way."""
        hit = self._state_uni.get(q, _UNASKED)
        if hit is not _UNASKED:
            return hit
        auto = self.tr.automaton
        out: int | None = _UNASKED
        for seq in self.byte_seqs:
            cur = q
            for depth, (lo, hi) in enumerate(seq):
                t = _range_target(auto.byte_edges[cur], lo, hi)
                if t is None or (t == _NO_EDGE and depth > 0):
                    out = None
                    break
                if t == _NO_EDGE:
                    cur = t
                    break
                if depth + 1 < len(seq) and not _only_consumes(auto, t):
                    out = None
                    break
                cur = t
            if out is None or (out is not _UNASKED and out != cur):
                out = None
                break
            out = cur
        self._state_uni[q] = out
        return out

    def _uniform_stepped(self, cid: int) -> int | None:
        """`_uniform`, by stepping every class of every character shape from the configuration."""
        after = self._after
        target: frozenset | None = None
        for seq in self.seqs:
            cur = {self.tr.configs[cid]}
            for classes in seq:
                nxt: set[frozenset] = set()
                for s in cur:
                    for c in classes:
                        nxt.add(after(s, c))
                        if len(nxt) > 1:
                            return None  # (most configurations: without stepping every class)
                cur = nxt
            if target is not None and target not in cur:
                return None
            target = next(iter(cur))
        return None if target is None else self.tr.intern(target)

    def _alive_from_states(self, cid: int) -> Any:
        """`_alive_paths`, read off the stacks' top states when each is told by
        `_alive_of_state` and every stack with an alive character has the same ones;
        _UNASKED otherwise."""
        reached: list[tuple] = []
        alive: tuple | None = None
        for st in self.tr.configs[cid]:
            if not st:
                continue  # (ACCEPT takes no input)
            told = self._alive_of_state(st[-1])
            if told is None:
                return _UNASKED
            if told is _TOO_MANY:
                return None  # (the configuration has those paths and more)
            paths, t = told
            if not paths:
                continue
            if alive is None:
                alive = paths
            elif paths != alive:
                return _UNASKED
            reached.append(st[:-1] + (t,))
        target = self._join(reached)
        if target is None:
            return _UNASKED  # (_alive_paths names the limit)
        return target, alive or ()

    def _alive_of_state(self, q: int) -> Any:
        """(the class paths of S's characters state q takes, the one state they all lead
        it to), through inner states that only consume; _TOO_MANY past MAX_PATHS paths;
        None when it cannot be told this way."""
        if q not in self._state_alive:
            self._state_alive[q] = self._read_alive(q)
        return self._state_alive[q]

    def _read_alive(self, q: int) -> Any:
        auto, segments = self.tr.automaton, self.tr.segments
        alive: list[tuple[int, tuple[int, ...]]] = []
        target = _NO_EDGE
        for i, seq in enumerate(self.seqs):
            paths: list[tuple[tuple[int, ...], int]] = [((), q)]
            for depth, classes in enumerate(seq):
                inner = depth + 1 < len(seq)
                first, last = classes[0], classes[-1] + 1  # (a run of classes)
                nxt = []
                for p, s in paths:
                    for lo, hi, ts in segments(s):
                        if hi <= first or lo >= last:
                            continue
                        if len(ts) > 1:
                            return None  # (a class leads to several states)
                        t = ts[0]
                        if inner:
                            if not _only_consumes(auto, t):
                                return None
                        elif auto.local(t) == _GOES_NOWHERE:
                            continue
                        nxt.extend((p + (c,), t) for c in range(max(lo, first), min(hi, last)))
                if len(nxt) > self.MAX_PATHS:
                    return _TOO_MANY
                paths = nxt
                if not paths:
                    break
            for p, t in paths:
                if target != _NO_EDGE and t != target:
                    return None
                target = t
                alive.append((i, p))
        return tuple(alive), target

    def _alive_paths(self, cid: int) -> tuple[int, tuple] | None:
        """(the one configuration the alive characters lead to, their class paths), None if several."""
        target: frozenset = _NOWHERE
        alive = []
        for shape in self._char_paths(self.tr.configs[cid]):
            if shape is None:
                return None
            i, paths = shape
            if paths:
                ends = {t for _, t in paths}
                if len(ends) > 1 or (target and target not in ends):
                    return None
                target = ends.pop()
                alive.extend((i, p) for p, _ in paths)
        return self.tr.intern(target), tuple(alive)

    def _char_paths(self, config: frozenset) -> Iterator[tuple[int, list[tuple[tuple[int, ...], frozenset]]] | None]:
        """Per character shape of S that can start in `config`: (its index, the class paths
        of its characters with the configuration each ends in); None, and no more, when
        there are too many paths or a frame could end inside a character."""
        after = self._after
        for i, seq in enumerate(self.seqs):
            if not any(after(config, c) for c in seq[0]):
                continue  # no character of this shape can start here
            paths: list[tuple[tuple[int, ...], frozenset]] = [((), config)]
            for depth, classes in enumerate(seq):
                paths = [(p + (c,), t) for p, s in paths for c in classes if (t := after(s, c))]
                if len(paths) > self.MAX_PATHS or (depth + 1 < len(seq) and any(ACCEPT in t for _, t in paths)):
                    yield None
                    return
                if not paths:
                    break
            yield i, paths

    def ranges(self, alive: tuple) -> tuple[tuple[int, int], ...] | None:
        """The code points spelled by alive class paths, as merged ranges (None: too many)."""
        if alive not in self._ranges:
            self._ranges[alive] = self._code_points(alive)
        return self._ranges[alive]

    def _code_points(self, alive: tuple) -> tuple[tuple[int, int], ...] | None:
        bc = self._bc  # (sorted: a class's bytes are bisect_left..bisect_right - 1)
        by_shape: dict[int, list[tuple[tuple[int, int], ...]]] = {}
        for i, path in alive:
            ivs = tuple(
                (max(lo, bisect_left(bc, c)), min(hi, bisect_right(bc, c) - 1))
                for (lo, hi), c in zip(self.byte_seqs[i], path)
            )
            if all(lo <= hi for lo, hi in ivs):
                by_shape.setdefault(i, []).append(ivs)
        out: list[tuple[int, int]] = []
        room = MAX_RANGES
        for seqs in by_shape.values():
            for ivs in _merged(seqs):
                got = _interval_code_points(ivs, room)
                if got is None:
                    return None
                room -= len(got)
                out.extend(got)
        return normalize_ranges(out)

    def _weight(self, cid: int) -> int:
        """The weight of the first bytes of S's characters that lead anywhere from `cid`."""
        hit = self._weights.get(cid)
        if hit is None:
            below = self.weight_below
            hit = self._weights[cid] = sum(below[hi] - below[lo] for lo, hi, target in self.tr.pieces_of(cid) if target)
        return hit

    def _splits(self, cid: int) -> bool:
        """Do two one-byte characters of S lead `cid` to different configurations? (Told
        from the class segments `_weight` read: then the characters are not one chain.)"""
        below = self.one_byte_below
        seen = None
        for lo, hi, target in self.tr.pieces_of(cid):
            if target and below[hi] > below[lo]:
                if seen is None:
                    seen = target
                elif target != seen:
                    return True
        return False

    def char_step(self, cid: int) -> tuple[int, tuple] | None:
        """(next configuration, alive set: FULL or code point ranges), None if not one chain."""
        if cid in self._next:
            return self._next[cid]
        out: tuple[int, tuple] | None = self._uniform_by_states(cid)
        if out is not None:  # (no class segments of `cid` needed)
            self._write_cells(cid, self._one_byte_classes, out[0])
            self._next[cid] = out
            return out
        weight = self._weight(cid)
        if weight == 0:  # no character of S can come: the end of a chain
            self._next[cid] = (DEAD_ID, FULL)
            return self._next[cid]
        if weight < MIN_ALIVE or self._splits(cid):  # too few characters to be worth it, or no chain
            self._next[cid] = None
            return None
        t = self._uniform_memo(cid)
        if t is not None:
            out = (t, FULL)
        else:
            out = self._alive_from_states(cid)
            if out is _UNASKED:
                out = self._alive_paths(cid)
        self._next[cid] = out
        return out

    def limit(self, cid: int) -> tuple[int, tuple] | None:
        if cid in self._limit:
            return self._limit[cid]
        first = self.char_step(cid)
        out: tuple[int, tuple] | None = None
        if first is not None:
            alive = first[1]
            ranges = FULL if alive == FULL else self.ranges(alive)
            worth = ranges == FULL or (ranges is not None and sum(b - a + 1 for a, b in ranges) >= MIN_ALIVE)
            if worth:
                seen = {cid}
                x, r = cid, 0
                while True:
                    step = self.char_step(x)
                    if step is None:
                        break
                    y, a = step
                    if y == DEAD_ID:
                        out = (r, ranges)
                        break
                    if a != alive or self.tr.accept[y]:
                        break
                    y = int(self.tr.canon[y])  # (within a token, a configuration's image behaves the same)
                    r += 1
                    if y in seen or r > self.max_chars:  # (no slice token has more characters)
                        out = (INFINITE, ranges)
                        break
                    seen.add(y)
                    x = y
        self._limit[cid] = out
        return out

    def open_limit(self, cid: int) -> tuple[int, tuple[tuple[int, int], ...]] | None:
        """`limit` for a chain that other characters of S may leave: (r, A) when the
        characters of a set A lead `cid` along one chain of r steps (INFINITE as in
        `limit`), with no ACCEPT on it nor at `cid`, after which none of them is alive. A is the set a
        chain through `cid` was found with, else the most characters that lead `cid` to one
        configuration. The other characters go anywhere: tokens holding one are not
        decided by length (`rest_outside`). None when `cid` has no such chain."""
        if cid in self._open:
            return self._open[cid]
        out = None
        hint = None if self.tr.accept[cid] else self._open_hint.get(cid)  # (a frame could return first)
        if hint is not None:
            out = self._open_chain(cid, hint)
        if out is None and not self.tr.accept[cid] and not self.weak(cid):
            first = self._main_paths(cid)
            if first is not None:
                aid = self._alive_ids.get(first[1])
                if aid is None:
                    aid = self._alive_ids[first[1]] = len(self._alive_sets)
                    one = sorted({p[0] for _, p in first[1] if len(p) == 1})
                    self._alive_sets.append((one, [p for _, p in first[1] if len(p) > 1]))
                    self._alive_classes.append(np.asarray(one, dtype=np.int64))
                    self._alive_paths_of.append(first[1])
                if aid != hint:
                    out = self._open_chain(cid, aid)
        self._open[cid] = out
        return out

    def weak(self, cid: int) -> bool:
        """Do fewer than MIN_ALIVE characters of S lead anywhere from `cid` (no chain worth
        a slice starts there)?"""
        return self._weight(cid) < MIN_ALIVE

    def on_open_chain(self, cid: int) -> bool:
        """Was `cid` reached along an open chain (`open_limit`)?"""
        return cid in self._open_hint

    def _open_chain(self, cid: int, aid: int) -> tuple[int, tuple[tuple[int, int], ...]] | None:
        """`open_limit` with the characters of the class paths numbered `aid`."""
        ranges = self.ranges(self._alive_paths_of[aid])
        if ranges is None or sum(b - a + 1 for a, b in ranges) < MIN_ALIVE:
            return None
        path, seen = [cid], {cid}
        x, r = cid, 0
        while True:
            y = self._follow(x, aid)
            if y == DEAD_ID:
                self._answer_along(path, aid, lambda i: (r - i, ranges))
                return r, ranges
            if y is None or self.tr.accept[y]:
                return None
            y = int(self.tr.canon[y])  # (as in `limit`)
            self._open_hint.setdefault(y, aid)
            r += 1
            if y in seen:  # (a cycle: every configuration on the way leads into it)
                self._answer_along(path, aid, lambda i: (INFINITE, ranges))
                return INFINITE, ranges
            if r > self.max_chars:
                return INFINITE, ranges
            seen.add(y)
            path.append(y)
            x = y

    def _answer_along(self, path: list[int], aid: int, answer: Callable[[int], tuple]) -> None:
        """`open_limit` of the configurations a chain went through (the i-th's is
        `answer(i)`), where that chain is the one they would follow: the next token's
        configuration is one of them, and need not follow it again."""
        for i, z in enumerate(path[1:], 1):
            if z not in self._open and self._open_hint.get(z) == aid and not self.tr.accept[z]:
                self._open[z] = answer(i)

    def _main_paths(self, cid: int) -> tuple[int, tuple] | None:
        """(the configuration the most one-byte characters of S lead `cid` to, their class
        paths). Only one-byte characters: the sets open chains pay for are ASCII (an
        e-mail's local part, a host name's labels), and the class paths of longer
        characters can number hundreds (a Unicode class next to a pattern's classes)."""
        groups: dict[frozenset, list[tuple[int, tuple[int, ...]]]] = {}
        shapes_of = self._one_byte_shapes_of  # (a one-byte character's class path is its class)
        for lo, hi, target in self.tr.pieces_of(cid):
            if target:
                for c in range(lo, hi):
                    for i in shapes_of.get(c, ()):
                        groups.setdefault(target, []).append((i, (c,)))
        best, most = None, 0
        below = self.tokens_below
        for target, alive in groups.items():
            if self.open_min_tokens:  # (cheap: before the code points of the set)
                firsts = {p[0] for _, p in alive}
                if sum(below[c + 1] - below[c] for c in firsts) < self.open_min_tokens:
                    continue
            alive.sort()
            ranges = self.ranges(tuple(alive))
            size = sum(b - a + 1 for a, b in ranges) if ranges is not None else 0
            if size > most:
                best, most = (target, tuple(alive)), size
        return None if best is None else (self.tr.intern(best[0]), best[1])

    def _follow_by_states(self, cid: int, aid: int) -> Any:
        """`_follow` for one-byte characters, when each stack's top state takes all of them
        to one state or none of them; _UNASKED when some top state cannot tell."""
        target = self._join_tops(cid, lambda q: self._state_follow(q, aid))
        return _UNASKED if target is None else target

    def _state_follow(self, q: int, aid: int) -> int | None:
        """The one state every one-byte class of the paths numbered `aid` leads state q to,
        _NO_EDGE when q takes none of them, None when it takes some or parts them."""
        key = (q, aid)
        hit = self._state_followed.get(key, _UNASKED)
        if hit is _UNASKED:
            spans = ((lo, hi, ts[0] if len(ts) == 1 else _MANY) for lo, hi, ts in self.tr.segments(q))
            hit = _one_target(self._alive_sets[aid][0], spans)
            if hit is _MANY:
                hit = None
            self._state_followed[key] = hit
        return hit

    def _follow(self, cid: int, aid: int) -> int | None:
        """Where every character of the class paths numbered `aid` leads `cid`: one
        configuration, DEAD_ID when none is alive, None when they part (or a frame could
        end inside one)."""
        key = (cid, aid)
        if key in self._followed:
            return self._followed[key]
        found = _UNASKED if self._alive_sets[aid][1] else self._follow_by_states(cid, aid)
        if found is _UNASKED:
            found = self._follow_stepped(cid, aid)
        if found is not None:
            self._write_cells(cid, self._alive_classes[aid], found)
        self._followed[key] = found
        return found

    def _write_cells(self, cid: int, classes: np.ndarray, target: int) -> None:
        """Write what a chain step found into the table: a walk down a long token of the
        chain's characters (a run of 80 dashes in an e-mail's local part) then needs no
        row filled per character."""
        if len(classes) and len(self.tr.configs[cid]) < CELLS_MIN_STACKS:
            self.tr.table[cid, classes] = target

    def _follow_stepped(self, cid: int, aid: int) -> int | None:
        """`_follow`, from the class segments of `cid`'s step."""
        one, wide = self._alive_sets[aid]
        config = self.tr.configs[cid]
        found = _one_target(one, self._segments(config)[1])
        if found is None:
            return None
        target: frozenset | None = found if found != _NO_EDGE else (_NOWHERE if one else None)
        after = self._after
        for path in wide:
            s = config
            for depth, c in enumerate(path):
                s = after(s, c)
                if not s:
                    break
                if depth + 1 < len(path) and ACCEPT in s:
                    return None
            if target is None:
                target = s
            elif s != target:
                return None
        return None if target is None else (DEAD_ID if not target else self.tr.intern(target))


def _one_target(one: list[int], spans: Iterable[tuple[int, int, Any]]) -> Any:
    """The target every class of `one` (sorted) has in `spans`, disjoint class segments
    (lo, hi, target): _NO_EDGE when no segment holds any of them, None when they part or
    some of them are in no segment (lead nowhere)."""
    target, taken = _NO_EDGE, 0
    for lo, hi, t in spans:
        n = bisect_left(one, hi) - bisect_left(one, lo)
        if n:
            if taken and t != target:
                return None
            target, taken = t, taken + n
    return None if 0 < taken < len(one) else target


DEAD_ID = 0
_NOWHERE: frozenset = frozenset()
MAX_RANGES = 4096  # code point ranges of one alive set (more: not a chain)
MIN_ALIVE = 8  # fewer alive characters than this: the walk prunes at once, a slice costs more
FULL = ("all",)
_NO_EDGE = -1
_UNASKED: Any = object()
_TOO_MANY: Any = object()
_MANY: Any = object()  # (a segment leading to several states: `_state_follow`)
_GOES_NOWHERE = ((), False)  # Automaton.local of a state that neither consumes nor ends


def _only_consumes(auto, q: int) -> bool:
    """Is state q's closure q itself (inside a character: no ε-move, call or rule end)?"""
    return not (auto.eps[q] or auto.calls[q] or q in auto.final)


def _range_target(edges: list[tuple[int, int, int]], lo: int, hi: int) -> int | None:
    """The one state every byte of lo..hi leads to by `edges`; _NO_EDGE when no byte of it
    has an edge; None when the bytes lead to different states, several, or only some anywhere."""
    target = _NO_EDGE
    spans = []
    for a, b, t in edges:
        if b < lo or a > hi:
            continue
        if target != _NO_EDGE and t != target:
            return None
        target = t
        spans.append((max(a, lo), min(b, hi)))
    if target == _NO_EDGE:
        return target
    spans.sort()
    reach = lo - 1
    for a, b in spans:
        if a > reach + 1:
            return None
        reach = max(reach, b)
    return target if reach >= hi else None


def _merged(seqs: list[tuple[tuple[int, int], ...]]) -> list[tuple[tuple[int, int], ...]]:
    """The same byte strings as the products of these interval sequences (all of one
    length), in fewer products: sequences that differ at one position only are one, with
    that position's intervals joined (from the last position to the first, so a class
    path's characters split over many continuation-byte classes come back whole)."""
    for pos in range(len(seqs[0]) - 1, -1, -1):
        rest: dict[tuple, list[tuple[int, int]]] = {}
        for ivs in seqs:
            rest.setdefault(ivs[:pos] + ivs[pos + 1 :], []).append(ivs[pos])
        seqs = [key[:pos] + (iv,) + key[pos:] for key, ivs in rest.items() for iv in normalize_ranges(ivs)]
    return seqs


def _interval_code_points(ivs: tuple[tuple[int, int], ...], most: int) -> list[tuple[int, int]] | None:
    """Code point ranges of the UTF-8 sequences whose k-th byte is in ivs[k] (None: more
    than `most` of them)."""
    k = len(ivs)
    if any(lo > hi for lo, hi in ivs):
        return []
    p = k - 1
    while p > 0 and ivs[p] == (0x80, 0xBF):
        p -= 1
    count = 1
    for lo, hi in ivs[:p]:
        count *= hi - lo + 1
    if count > most:
        return None
    out = []
    tail_lo, tail_hi = bytes([0x80] * (k - p - 1)), bytes([0xBF] * (k - p - 1))
    for prefix in product(*(range(lo, hi + 1) for lo, hi in ivs[:p])):
        a = bytes(prefix) + bytes([ivs[p][0]]) + tail_lo
        b = bytes(prefix) + bytes([ivs[p][1]]) + tail_hi
        out.append((ord(a.decode("utf-8")), ord(b.decode("utf-8"))))
    return out


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
