"""How a configuration's mask is walked: the base/relative split, cached walks, slices.

A configuration is split into a *base* (the return points every stack shares) and a
*relative* configuration (the stacks above it); tokens are walked from the relative one
and continued from where the base returns (`_walk_from`, one cached `WalkPart` per walk).
Where a vocabulary slice decides a relative configuration's chain (chains.py), the
slice's tokens are taken by length and only the rest of the trie is walked
(`_slice_for`, `_open_slice_for`). `CompiledGrammar` (compile.py) is a `MaskWalks`.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

import numpy as np

from ministruct.engine.automaton import ACCEPT, Stack
from ministruct.engine.chains import FULL, INFINITE, SliceChains
from ministruct.engine.prune import build_pruner, choose_slice
from ministruct.engine.slices import (
    CHAIN_SLICES,
    INDEXED_OUTSIDE,
    NOT_IN,
    OPEN_SLICE,
    lengths_known,
    lengths_within,
    rest_outside,
    rest_outside_kept,
    tokens_starting_in,
)
from ministruct.engine.trie import TokenTrie
from ministruct.engine.walk import Pruner, WalkResult, walk

WALK_CACHE_BYTES = 256 * 1024 * 1024
_ROOT_NODES = np.zeros(1, dtype=np.int64)  # (walks copy their entries)
ROOT = -1  # a walk that starts at the trie's root
# frames kept above a base: with one, a rule called per character (a repeated item) would
# return after every character, and strings could not be taken by slices
KEEP_FRAMES = 2
# ... except at the top of a mask, where one is kept: the frame below is the caller's
# return point (which property, which item), and every caller of the rule shares the walk
# of the frames above it; a slice's chain takes the frames it needs back (_slice_split)
ROOT_KEEP_FRAMES = 1
PRUNE_MIN_TOKENS = 2048  # a node with fewer tokens below is walked, not analysed
WORD_PRUNE_MIN_TOKENS = 1  # the word slice's check is a set lookup: every node is asked
# an open chain whose characters make fewer tokens than this is walked: its rest trie
# (built once per character set) would save little
OPEN_MIN_TOKENS = 2048
OPEN_TOKENS_PER_LEAVER = 8  # ... and at least this many per token that starts in its set and leaves it
# a rest trie costs about this per token of the vocabulary to build (TokenTrie.subset: 5 ms
# for 49k tokens, 15-30 ms for 262k): an open chain's set gets its trie once whole-trie
# walks from its configurations have cost as much (a chain met in a few steps never pays)
OPEN_BUILD_S_PER_TOKEN = 1e-7
FEW_STACKS = 4  # a relative configuration this small loses its callers' frames before its chain is followed
SHORT_CHAIN = 4  # a closed chain this short is walked unless its token set is known already (_slice_for)


@dataclass(frozen=True)
class WalkPart:
    """One cached walk: its key (where continuations of its exits start) and its tokens."""

    key: int
    found: WalkResult
    # a slice's tokens, when the slice decided them: a mask, or (lengths, limit) for those
    # of at most `limit` characters (written straight into the mask: one array per limit
    # would be new pages to fault in, for each character of a bounded string)
    members: np.ndarray | tuple[np.ndarray, int] | None

    @property
    def nbytes(self) -> int:
        return self.found.nbytes


class MaskWalks:
    """The walks behind a CompiledGrammar's masks (its caches live on the CompiledGrammar)."""

    def _top_split(self, cid: int) -> tuple[Stack, int]:
        """The split at the top of a mask (ROOT_KEEP_FRAMES frames kept)."""
        return self._split(cid, ROOT_KEEP_FRAMES)

    def _split(self, cid: int, keep: int = KEEP_FRAMES) -> tuple[Stack, int]:
        """(base, relative configuration id): the longest prefix all stacks share such that
        each keeps its top `keep` frames, and the stacks above it."""
        hit = self._splits.get(cid if keep == KEEP_FRAMES else -cid - 1)
        if hit is not None:
            return hit
        config = self.configs[cid]
        if ACCEPT in config or len(config) < 1 or self.automaton.greedy:
            hit = ((), cid)
        else:
            stacks = list(config)
            p = max(0, min(map(len, stacks)) - keep)
            # the prefix all stacks share is the one the (lexicographically) least and
            # greatest share; prefix equality is monotone, so bisect on its length
            lo, hi = min(stacks), max(stacks)
            if lo[:p] != hi[:p]:
                a, b = 0, p  # lo[:a] == hi[:a], lo[:b] != hi[:b]
                while b - a > 1:
                    mid = (a + b) // 2
                    if lo[:mid] == hi[:mid]:
                        a = mid
                    else:
                        b = mid
                p = a
            hit = ((), cid) if p == 0 else (lo[:p], self.transitions.intern(frozenset(s[p:] for s in stacks)))
        self._splits[cid if keep == KEEP_FRAMES else -cid - 1] = hit
        return hit

    def _slice_split(self, cid: int) -> tuple[Stack, int]:
        """`_split`, with frames moved from the base into the relative configuration while
        that lets a slice decide it: a string body in a rule of its own (a repeat hoisted
        out by grammar/limits.py, `body ::= char{0,40}` called as `"\"" body "\""`) can end
        after any character, so above the split the characters are not one chain (the walk
        would have to see the rule return mid-token); one frame deeper the closing quote is
        inside, and they are."""
        hit = self._slice_splits.get(cid)
        if hit is not None:
            return hit
        name = next((n for n in CHAIN_SLICES if n in self._slices), None)  # (the slice _slice_for takes)
        chains = self._chains_of(name) if name is not None else None
        # the top alone (one frame kept) when a slice decides it or none decides either split;
        # else the usual split, deepened as a slice needs (a string body of a rule of its own)
        hit = top = self._top_split(cid)
        if chains is not None and name is not None:
            top = self._deepened(*top, name, chains)
            hit = top
            if not self._decided(top[1], name, chains):
                usual = self._deepened(*self._split(cid), name, chains)
                if self._decided(usual[1], name, chains):
                    hit = usual
        self._slice_splits[cid] = hit
        return hit

    def _decided(self, rel: int, name: str, chains: SliceChains) -> bool:
        """Does the slice decide the walk from `rel` (a chain, or an open chain)?"""
        return chains.limit(rel) is not None or name == OPEN_SLICE and chains.open_limit(rel) is not None

    def _deepened(self, base: Stack, rel: int, name: str, chains: SliceChains) -> tuple[Stack, int]:
        """A split with frames moved between base and relative configuration while that lets
        the slice decide the part above (see _slice_split)."""
        # a chain above a caller's frame is the chain without that frame: tried first, it is
        # followed once for every caller (a bounded string's one or two stacks); for many stacks
        # (a tool's name among 200) only when a chain starts there at all
        if len(self.configs[rel]) <= FEW_STACKS or chains.limit(rel) is not None:
            base, rel = self._shallower(base, rel, chains)
        for _ in range(KEEP_FRAMES):
            if not base or chains.limit(rel) is not None:
                break
            closed = chains.char_step(rel) is not None
            # (the same for an open chain: `"." part` repeated, part ::= [a-z]{1,64}, of an
            # e-mail's local part, may return after any character of the part)
            opened = name == OPEN_SLICE and chains.open_limit(rel) is None and not chains.weak(rel)
            if not closed and not opened:
                break
            frame, config = base[-1:], self.configs[rel]
            stacks = {frame + st for st in config if st != ACCEPT}
            if ACCEPT in config:
                stacks |= self.automaton.closure(frame)
            deeper = self.transitions.intern(frozenset(stacks))
            if not (closed and chains.limit(deeper) is not None or opened and chains.open_limit(deeper) is not None):
                break
            base, rel = base[:-1], deeper
        return base, rel

    def _shallower(self, base: Stack, rel: int, chains: SliceChains) -> tuple[Stack, int]:
        """Frames every stack of `rel` holds at its bottom moved into the base while the
        slice still decides what is above them: a bounded string item of an array with
        `maxItems` is called from each copy of the repeat, one return point per copy, and
        above that frame its walks are the same for every item."""
        while True:
            config = self.configs[rel]
            if ACCEPT in config:
                break
            stacks = list(config)
            frame = stacks[0][:1]
            if any(len(st) < 2 or st[:1] != frame for st in stacks):
                break
            up = self.transitions.intern(frozenset(st[1:] for st in stacks))
            if chains.limit(up) is None:
                break
            base, rel = base + frame, up
        return base, rel

    def _return_to(self, base: Stack) -> int:
        """The configuration after the frames above `base` have returned into it."""
        hit = self._returns.get(base)
        if hit is None:
            hit = self.transitions.intern(self.automaton.closure(base))
            self._returns[base] = hit
        return hit

    def _walk_from(self, parent: WalkPart | None, rel: int) -> WalkPart:
        """The walk from `rel`: at the trie's root, or at the exits of `parent`."""
        key = (ROOT if parent is None else parent.key, rel)
        hit = self._walks.get(key)
        if hit is not None:
            self._walks.move_to_end(key)
            return hit
        members = None
        prune = None
        self._renting = None
        if parent is None:
            members, trie = self._slice_for(rel)
            nodes = _ROOT_NODES
            if members is None:
                prune = self._pruner()
        else:
            trie, nodes = parent.found.trie, parent.found.exits
        renting, t0 = self._renting, time.perf_counter()
        found = walk(trie, self.byte_class, self.transitions, nodes, rel, prune=prune, forks=self._by_parts())
        if renting is not None:
            self._rent[renting] = self._rent.get(renting, 0.0) + time.perf_counter() - t0
        self._walk_keys += 1
        part = WalkPart(self._walk_keys, found, members)
        self._walks[key] = part
        self._walk_bytes += part.nbytes
        while self._walk_bytes > WALK_CACHE_BYTES and len(self._walks) > 1:
            _, old = self._walks.popitem(last=False)
            self._walk_bytes -= old.nbytes
        return part

    def _slice_for(self, rel: int) -> tuple[np.ndarray | tuple[np.ndarray, int] | None, TokenTrie]:
        """(the slice tokens legal from `rel` (see WalkPart.members), the trie of the other
        tokens), when a slice applies."""
        if OPEN_SLICE in self._slices and self._chains_of(OPEN_SLICE).on_open_chain(rel):
            found = self._open_slice_for(rel)  # (first: other characters leave the chain here)
            if found[0] is not None:
                return found
            self._renting = None  # (a closed chain may decide it instead)
        for name in CHAIN_SLICES:
            sl = self._slices.get(name)
            if sl is None:
                continue
            found = self._chains_of(name).limit(rel)
            if found is None:
                continue
            limit, alive = found
            if limit != INFINITE and limit <= SHORT_CHAIN and alive != FULL and not lengths_known(sl, alive):
                return None, self.trie  # (a day's last digit: walking its few tokens costs less than finding the set)
            length = sl.length if alive == FULL else lengths_within(sl, alive)
            if limit != INFINITE:
                return (length, limit), sl.rest
            members = self._members.get((name, alive))
            if members is None:
                members = self._members[(name, alive)] = length != NOT_IN
                members.setflags(write=False)
            return members, sl.rest
        return self._open_slice_for(rel)

    def _open_slice_for(self, rel: int) -> tuple[np.ndarray | tuple[np.ndarray, int] | None, TokenTrie]:
        """`_slice_for` by an open chain (SliceChains.open_limit): the tokens made of its
        characters are taken by length, the rest of the vocabulary is walked."""
        sl = self._slices.get(OPEN_SLICE)
        found = None if sl is None else self._chains_of(OPEN_SLICE).open_limit(rel)
        if found is None:
            return None, self.trie
        limit, ranges = found
        length = lengths_within(sl, ranges)
        sizes = self._open_sizes.get(ranges)
        if sizes is None:
            sizes = self._open_sizes[ranges] = (
                int(np.count_nonzero(length != NOT_IN)),
                tokens_starting_in(self.trie, ranges),
            )
        size, starting = sizes
        # the tokens that start with a character of the set and leave it later are walked
        # along the chain without the pruner's cuts: worth it only when they are few
        # (an e-mail's local part: a few dozen; a property name that is not one of the
        # schema's names, whose set lacks their first letters: most of the vocabulary)
        if size < OPEN_MIN_TOKENS or (starting - size) * OPEN_TOKENS_PER_LEAVER > size:
            return None, self.trie
        if limit != INFINITE:
            members: np.ndarray | tuple[np.ndarray, int] = (length, limit)
        else:
            members = self._members.get((OPEN_SLICE, ranges))
            if members is None:
                members = self._members[(OPEN_SLICE, ranges)] = length != NOT_IN
                members.setflags(write=False)
        # chains over the ASCII letters (or the small ones) and more share the trie of the
        # tokens not made of those alone: it holds every token not a member (and some that
        # are, walked to the same answer), and is built once per process instead of per
        # set (e-mail local parts, host names, their labels); the ASCII letters' comes with
        # the vocabulary's index (slices.INDEXED_OUTSIDE)
        walked = next((w for w in _SHARED_WALKED if _covers(ranges, w)), ranges)
        rest = rest_outside_kept(walked, self._index)
        if rest is None:
            if self._rent.get(walked, 0.0) < OPEN_BUILD_S_PER_TOKEN * self.vocab.n_logits:
                self._renting = walked
                return None, self.trie
            rest = rest_outside(sl, walked, self.trie)
        return members, rest

    def _chains_of(self, name: str) -> SliceChains:
        chains = self._chains.get(name)
        if chains is None:
            sl = self._slices[name]
            chains = self._chains[name] = SliceChains(
                sl, self.transitions, self.byte_class, self.trie, OPEN_MIN_TOKENS if name == OPEN_SLICE else 0
            )
        return chains

    def _slice_name(self) -> str:
        """The slice whose cuts this grammar's whole-trie walks take (prune.choose_slice)."""
        if self._chosen_slice is None:
            name = choose_slice(self.automaton)
            self._chosen_slice = name if name in self._slices else next(iter(self._slices))
        return self._chosen_slice

    def _by_parts(self) -> bool:
        """Do the masks and walks of union configurations go through their parts? For
        grammars whose names loop on word characters (the `word` slice), where a name sits
        next to keyword prefixes; elsewhere (JSON strings) measured not to pay: the parts'
        own masks cost more walks and memory than they save."""
        if self._parts_pay is None:
            self._parts_pay = bool(self._slices) and not self.automaton.has_token_edges and self._slice_name() == "word"
            if self._parts_pay:
                self.transitions.use_part_arrays()
        return self._parts_pay

    def _pruner(self) -> Pruner | None:
        """Cuts for walks of the whole trie: below nodes in configurations a slice decides
        for good, slice-only tails are legal without walking them (prune.py)."""
        if not self._slices:
            return None
        if self._prune is None:
            name = self._slice_name()
            self._prune = build_pruner(
                name,
                self._slices[name],
                self.automaton,
                self.configs,
                lambda: self._chains_of(name),
                PRUNE_MIN_TOKENS if name == "json-char" else WORD_PRUNE_MIN_TOKENS,
            )
        return self._prune


# the character sets whose rest tries open chains share, when their set holds one (the
# first such): the ASCII letters, the small ones
_SHARED_WALKED = (*INDEXED_OUTSIDE, ((0x61, 0x7A),))


def _covers(ranges: tuple[tuple[int, int], ...], inner: tuple[tuple[int, int], ...]) -> bool:
    """Is every code point of `inner` in `ranges` (merged ranges, in order)?"""
    return all(any(a <= lo and hi <= b for a, b in ranges) for lo, hi in inner)
