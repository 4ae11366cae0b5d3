"""The cuts of whole-trie walks (walk.Pruner) for one grammar: which vocabulary slice,
and which configurations it decides for good.

Two slices serve: `json-char`, for grammars whose strings loop on JSON string
characters (a configuration is stable when every such character keeps it on one chain
for ever: SliceChains.forever), and `word` ([0-9A-Z_a-z]), for grammars whose
identifiers loop on word characters outside quotes (`choose_slice`). A configuration is
word-stable when one of its stacks has its top in a *word loop*: a set of automaton
states each of which takes every word byte into the set. Such a stack survives any run
of word bytes (a consuming top stays in its own closure), so from a node in that
configuration every token whose bytes from the node's depth on are word characters is
legal, without walking it.
"""

from __future__ import annotations

from typing import Callable

import numpy as np

from ministruct.engine.automaton import Automaton
from ministruct.engine.chains import SliceChains
from ministruct.engine.slices import MAX_SUFFIX_DEPTH, Slice
from ministruct.engine.walk import Pruner

WORD_BYTES = tuple(b for b in range(256) if chr(b).isascii() and (chr(b).isalnum() or chr(b) == "_"))
# the one-byte JSON string characters: a state looping on them all is inside a string
_JSON_ASCII = tuple(b for b in range(0x20, 0x80) if b not in (0x22, 0x5C))


def loop_states(auto: Automaton, alphabet: tuple[int, ...]) -> np.ndarray:
    """bool per automaton state: in the greatest set L of consuming states such that each
    byte of `alphabet` leads each state of L, through its edge and the moves without
    input that stay in or above its frame (Automaton.local), to a stack topped in L."""
    n = len(auto.byte_edges)
    want = np.zeros(256, dtype=bool)
    want[list(alphabet)] = True
    below = np.concatenate(([0], np.cumsum(want))).tolist()  # alphabet bytes below each byte
    need = len(alphabet)
    groups: dict[int, set[frozenset[int]]] = {}  # state -> the target sets its alphabet bytes have
    for q, es in enumerate(auto.byte_edges):
        if not es or (len(es) == 1 and es[0][1] - es[0][0] < need - 1):
            continue  # (most states: one literal byte)
        if sum(below[hi + 1] - below[lo] for lo, hi, _ in es) < need:
            continue  # (most states: too few of the bytes, told without spelling them)
        # the bytes between two consecutive edge bounds share their targets
        bounds = sorted({lo for lo, _, _ in es} | {hi + 1 for _, hi, _ in es})
        covered = 0
        sets: set[frozenset[int]] = set()
        for lo, hi in zip(bounds, bounds[1:]):
            k = below[hi] - below[lo]
            if k:
                ts = frozenset(t for a, b, t in es if a <= lo <= b)
                if ts:
                    covered += k
                    sets.add(ts)
        if covered == need:
            groups[q] = sets
    tops: dict[int, set[int]] = {}
    succ: dict[int, list[set[int]]] = {}
    for q, sets in groups.items():
        for t in set().union(*sets):
            if t not in tops:
                tops[t] = {rel[-1] for rel in auto.local(t)[0]}
        succ[q] = [set().union(*(tops[t] for t in ts)) for ts in sets]
    alive = set(groups)
    changed = True
    while changed:
        changed = False
        for q in list(alive):
            if any(xs.isdisjoint(alive) for xs in succ[q]):
                alive.discard(q)
                changed = True
    found = np.zeros(n, dtype=bool)
    found[list(alive)] = True
    return found


def choose_slice(auto: Automaton) -> str:
    """`word` for grammars with a word loop outside quotes, else `json-char`. A grammar
    with a JSON string body (a loop on the JSON string characters from a state that '"'
    does not continue) takes `word` only when some word loop is reached from its start
    without a '"': names among a language's lexemes (a Lark grammar's CNAME beside its
    ESCAPED_STRING), not a JSON value's strings (an e-mail's local part, a pattern)."""
    words = loop_states(auto, WORD_BYTES)
    if not words.any():
        return "json-char"
    strings = loop_states(auto, _JSON_ASCII)  # (a JSON string loop is a word loop too)
    if not any(not _continues(auto, q, 0x22) for q in np.flatnonzero(strings).tolist()):
        return "word"
    return "word" if _reached_unquoted(auto, words) else "json-char"


def _continues(auto: Automaton, q: int, byte: int) -> bool:
    return any(lo <= byte <= hi for lo, hi, _ in auto.byte_edges[q])


def _reached_unquoted(auto: Automaton, targets: np.ndarray) -> bool:
    """Is a state of `targets` reached from the grammar's start without reading a '"'?
    Calls are entered and also stepped over (as if the callee could return without a
    quote), so a word loop after a quoted string counts only when the quotes are inline."""
    todo = [auto.start[auto.grammar.root]]
    seen = {todo[0]}
    while todo:
        q = todo.pop()
        if targets[q]:
            return True
        nxt = [t for lo, hi, t in auto.byte_edges[q] if not lo == hi == 0x22]
        nxt += auto.eps[q]
        for name, ret in auto.calls[q]:
            nxt += (auto.start[name], ret)
        for t in nxt:
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return False


def build_pruner(
    name: str, sl: Slice, auto: Automaton, configs: list, chains: Callable[[], SliceChains], min_tokens: int
) -> Pruner:
    """The Pruner of slice `name` over the grammar's configurations (`configs`, grown in place)."""
    known = {"ids": np.full(64, -1, dtype=np.int8)}
    if name == "word":
        loops = loop_states(auto, WORD_BYTES)

        def decide(x: int) -> bool:
            return any(st and loops[st[-1]] for st in configs[x])
    else:
        forever = chains().forever

        def decide(x: int) -> bool:
            return forever(x)

    def stable(states: np.ndarray) -> np.ndarray:
        arr = known["ids"]
        if len(arr) < len(configs):
            grown = np.full(2 * len(configs), -1, dtype=np.int8)
            grown[: len(arr)] = arr
            arr = known["ids"] = grown
        vals = arr[states]
        if (vals < 0).any():
            for x in set(states[vals < 0].tolist()):
                arr[x] = decide(x)
            vals = arr[states]
        return vals == 1

    one_byte = np.zeros(256, dtype=bool)
    for a, b in sl.ranges:
        one_byte[a : min(b, 0x7F) + 1] = a <= 0x7F
    return Pruner(sl.need_walk, sl.suffix_ok, stable, MAX_SUFFIX_DEPTH, min_tokens, one_byte, lambda: known["ids"])
