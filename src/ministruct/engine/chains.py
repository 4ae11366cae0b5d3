"""Slice chains: per grammar, the configurations a vocabulary slice decides, and how.

A slice (slices.py) holds, per vocabulary, the tokens made only of characters of a set S
and their lengths. Where a configuration takes every character of S it can take (its
*alive* set) to one same next configuration, again and again, a slice token is legal
exactly when its characters are alive and there are few enough of them: `SliceChains`
finds those chains and their lengths, on the grammar's interned configurations.
"""

from __future__ import annotations

from bisect import bisect_right
from itertools import accumulate
from typing import Any, Callable, Iterator

import numpy as np

from ministruct.engine.automaton import ACCEPT, MAX_STACKS
from ministruct.engine.slices import Slice, tokens_by_first_byte
from ministruct.engine.spans import NO_EDGE, one_target, range_target
from ministruct.engine.table import CELLS_MIN_STACKS
from ministruct.engine.trie import TokenTrie
from ministruct.engine.utf8 import path_code_points, utf8_sequences

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
        goes (`step_of(q)`: one state, or NO_EDGE for nowhere); None when some top state
        cannot tell (`step_of` is None) or the result holds more than MAX_STACKS stacks."""
        reached: list[tuple] = []
        for st in self.tr.configs[cid]:
            if not st:
                continue  # (ACCEPT takes no input)
            t = step_of(st[-1])
            if t is None:
                return None
            if t != NO_EDGE:
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
        only consume (their closure is themselves); NO_EDGE when q takes no first byte
        of any character; None when neither can be told this way."""
        hit = self._state_uni.get(q, _UNASKED)
        if hit is not _UNASKED:
            return hit
        auto = self.tr.automaton
        out: int | None = _UNASKED
        for seq in self.byte_seqs:
            cur = q
            for depth, (lo, hi) in enumerate(seq):
                t = range_target(auto.byte_edges[cur], lo, hi)
                if t is None or (t == NO_EDGE and depth > 0):
                    out = None
                    break
                if t == NO_EDGE:
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
        target = NO_EDGE
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
                if target != NO_EDGE and t != target:
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
            self._ranges[alive] = path_code_points(self.byte_seqs, self._bc, alive, MAX_RANGES)
        return self._ranges[alive]

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
        NO_EDGE when q takes none of them, None when it takes some or parts them."""
        key = (q, aid)
        hit = self._state_followed.get(key, _UNASKED)
        if hit is _UNASKED:
            spans = ((lo, hi, ts[0] if len(ts) == 1 else _MANY) for lo, hi, ts in self.tr.segments(q))
            hit = one_target(self._alive_sets[aid][0], spans)
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
        found = one_target(one, self._segments(config)[1])
        if found is None:
            return None
        target: frozenset | None = found if found != NO_EDGE else (_NOWHERE if one else None)
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


DEAD_ID = 0
_NOWHERE: frozenset = frozenset()
MAX_RANGES = 4096  # code point ranges of one alive set (more: not a chain)
MIN_ALIVE = 8  # fewer alive characters than this: the walk prunes at once, a slice costs more
FULL = ("all",)
_UNASKED: Any = object()
_TOO_MANY: Any = object()
_MANY: Any = object()  # (a segment leading to several states: `_state_follow`)
_GOES_NOWHERE = ((), False)  # Automaton.local of a state that neither consumes nor ends


def _only_consumes(auto, q: int) -> bool:
    """Is state q's closure q itself (inside a character: no ε-move, call or rule end)?"""
    return not (auto.eps[q] or auto.calls[q] or q in auto.final)
