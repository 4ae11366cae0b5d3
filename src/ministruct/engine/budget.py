"""Token budgets: the fewest tokens that can still finish the grammar, and the legal set
narrowed to tokens after which a completion is guaranteed to fit.

The bound is sound, not a guess. Every NFA state q gets `fin[q]`, the fewest steps from
q to the end of its rule, where a step is one byte that the vocabulary has as a one-byte
token, one token that spells a literal stretch, or one whole-token edge (`<[N]>`), and a
call costs the called rule's own fewest steps. A parser stack (return points, then the
current state) can be finished in the sum of `fin` over its frames, a configuration in
the least such sum over its stacks: that many one-byte tokens always complete the
output. `fin` is a shortest-derivation problem (Knuth's generalisation of Dijkstra):
states are settled in order of cost from the rule ends backwards, and a call edge is
relaxed once both its return point and the called rule's start are settled.

Literal stretches (keys, punctuation) may also be crossed by the longest vocabulary
token that spells them, one step each; everything else counts one token per byte. So the
bound over-estimates what a real tokenizer needs inside free text (a word is usually one
token, not one per letter): narrowing starts a little early, never too late.
"""

from __future__ import annotations

import heapq
import threading
from collections import OrderedDict

import numpy as np

from ministruct.engine.automaton import Config
from ministruct.engine.compile import DEAD, CompiledGrammar
from ministruct.errors import BudgetTooSmall, UsageError

INF = np.iinfo(np.int32).max // 4
NEED_CACHE_BYTES = 64 * 1024 * 1024
GREEDY_SEARCH_NODES = 20_000  # configurations a greedy completion search expands at most (then: INF)


def _one_byte_tokens(compiled: CompiledGrammar) -> np.ndarray:
    """bool[256]: the bytes some ordinary one-byte token spells (the trie root's children
    where a token ends)."""
    trie = compiled.trie
    have = np.zeros(256, dtype=bool)
    lo = int(trie.child_start[0])
    kids = np.arange(lo, lo + int(trie.child_count[0]))
    have[trie.node_byte[kids[trie.node_token[kids] >= 0]]] = True
    return have


def _literal_shortcuts(compiled: CompiledGrammar) -> list[tuple[int, int, int]]:
    """(q, p, token): one ordinary token spells the bytes of a literal stretch from q to p.

    A literal stretch is a chain of states with one single-byte edge each (how the
    automaton builds a literal, e.g. `","unit":"`); the longest token that spells a prefix
    of the chain takes one step over it, so the bound counts keys and punctuation about
    as the tokenizer does instead of one token per byte. The chain is followed down the
    vocabulary's trie, so it stops where no token goes on."""
    a = compiled.automaton
    trie = compiled.trie
    child_start, child_count, node_byte, node_token = (
        trie.child_start,
        trie.child_count,
        trie.node_byte,
        trie.node_token,
    )
    out: list[tuple[int, int, int]] = []
    for q in range(len(a.eps)):
        x, node, depth, best, token = q, 0, 0, None, -1
        while True:
            edges = a.byte_edges[x]
            if len(edges) != 1 or edges[0][0] != edges[0][1] or a.eps[x] or a.calls[x] or a.token_edges[x]:
                break
            if x in a.final and x != q:
                break
            lo, n = int(child_start[node]), int(child_count[node])
            kids = node_byte[lo : lo + n]
            i = int(np.searchsorted(kids, edges[0][0]))
            if i == n or kids[i] != edges[0][0]:
                break
            node, x, depth = lo + i, edges[0][2], depth + 1
            if depth >= 2 and node_token[node] >= 0:
                best, token = x, int(node_token[node])
        if best is not None:
            out.append((q, best, token))
    return out


def state_costs(compiled: CompiledGrammar) -> list[int]:
    """fin[q] for every NFA state: an upper bound on the fewest tokens from q to the end of
    q's rule (INF: none)."""
    a = compiled.automaton
    n = len(a.eps)
    have = _one_byte_tokens(compiled)
    have_sum = np.concatenate(([0], np.cumsum(have)))
    rev: list[list[tuple[int, int]]] = [[] for _ in range(n)]  # target -> (source, cost)
    by_ret: list[list[tuple[int, str]]] = [[] for _ in range(n)]  # return point -> (caller, rule)
    by_start: dict[int, list[tuple[int, int]]] = {}  # rule start -> (caller, return point)
    for q in range(n):
        for t in a.eps[q]:
            rev[t].append((q, 0))
        for lo, hi, t in a.byte_edges[q]:
            if have_sum[hi + 1] - have_sum[lo] > 0:
                rev[t].append((q, 1))
        for e in a.token_edges[q]:
            rev[e.target].append((q, 1))
        for name, ret in a.calls[q]:
            by_ret[ret].append((q, name))
            by_start.setdefault(a.start[name], []).append((q, ret))
    for q, t, _ in _literal_shortcuts(compiled):
        rev[t].append((q, 1))
    fin = [INF] * n
    heap = [(0, q) for q in a.final]
    heapq.heapify(heap)
    done = [False] * n

    def relax(q: int, d: int) -> None:
        if d < fin[q]:
            fin[q] = d
            heapq.heappush(heap, (d, q))

    for q in a.final:
        fin[q] = 0
    while heap:
        d, x = heapq.heappop(heap)
        if done[x] or d > fin[x]:
            continue
        done[x] = True
        for q, w in rev[x]:
            relax(q, d + w)
        for q, name in by_ret[x]:
            s = a.start[name]
            if done[s]:
                relax(q, d + fin[s])
        for q, ret in by_start.get(x, ()):
            if done[ret]:
                relax(q, d + fin[ret])
    return fin


class Budget:
    """Completion costs for one CompiledGrammar; safe to share between threads.

    The largest finite need of each configuration seen is saved with the grammar
    (CompiledGrammar.persist): a later run narrows a mask whose every token leaves
    enough room without walking the vocabulary again (on a 262k vocabulary a string's
    contents took 30 ms), and computes a configuration's full need only once the budget
    is that short."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self.fin = state_costs(compiled)
        self._config_cost: dict[int, int] = {}
        self._need: OrderedDict[int, tuple[np.ndarray, int]] = OrderedDict()
        self._need_bytes = 0
        self._worst: dict[int, int] = {}  # configuration -> its need's largest finite value
        self._computed = 0
        saved = compiled.saved_arrays("budget")
        if "worst_ids" in saved and len(saved["worst_ids"]) == len(saved.get("worst", ())):
            n = len(compiled.configs)
            self._worst = {c: w for c, w in zip(saved["worst_ids"].tolist(), saved["worst"].tolist()) if 0 <= c < n}
        self._lock = threading.RLock()
        # greedy lexemes: `fin` is a lower bound only (a completion may need a separator, and
        # some configurations never complete), so a configuration's cost is searched for
        self._greedy_classes: list[int] | None = None
        self._greedy_words: list[bytes] = []
        if compiled.automaton.greedy:
            have = _one_byte_tokens(compiled)
            classes = compiled.byte_class
            self._greedy_classes = sorted({int(classes[b]) for b in range(256) if have[b]})
            # the tokens that spell the grammar's literals (keywords, punctuation): a step each
            tokens = compiled.vocab.tokens
            self._greedy_words = sorted({tokens[t] for _, _, t in _literal_shortcuts(compiled)})

    def to_arrays(self) -> dict[str, np.ndarray]:
        """What persist() saves: the largest finite need of every configuration seen."""
        with self._lock:
            ids = list(self._worst)
            return {
                "worst_ids": np.asarray(ids, dtype=np.int64),
                "worst": np.asarray([self._worst[c] for c in ids], dtype=np.int64),
            }

    def learned(self) -> int:
        """Configurations whose need this process computed."""
        return self._computed

    def config_cost(self, cid: int) -> int:
        """Fewest tokens that complete the output from configuration `cid` (INF: none)."""
        hit = self._config_cost.get(cid)
        if hit is None:
            if cid == DEAD:
                hit = INF
            elif self._greedy_classes is not None:
                with self.compiled._lock:  # (the search fills the table)
                    hit = self._greedy_cost(cid)
            else:
                hit = self._cost_of(self.compiled.configs[cid])
            self._config_cost[cid] = hit
        return hit

    def _greedy_cost(self, cid: int) -> int:
        """With greedy lexemes: the fewest tokens after which the output is complete, a token
        being a one-byte token or one that spells a literal stretch of the grammar (as `fin`
        counts them), found by an A* search over the transition table with `fin` as its
        estimate (every greedy completion is one of the grammar's). The result is the length
        of a completion the search found (an upper bound: sound); one that finds none within
        GREEDY_SEARCH_NODES configurations says INF (the budget then only narrows more)."""
        tr, configs = self.compiled.transitions, self.compiled.configs
        classes = self._greedy_classes
        assert classes is not None
        estimate: dict[int, int] = {}

        def h(c: int) -> int:
            e = estimate.get(c)
            if e is None:
                e = estimate[c] = self._cost_of(configs[c])
            return e

        if h(cid) >= INF:
            return INF
        best = {cid: 0}
        heap = [(h(cid), 0, cid)]
        expanded = 0
        while heap:
            _, g, c = heapq.heappop(heap)
            if g > best[c]:
                continue
            if tr.automaton.is_accepting(configs[c]):
                return g
            expanded += 1
            if expanded > GREEDY_SEARCH_NODES:
                return INF
            nexts = [tr.get(c, cls) for cls in classes]
            nexts += [tr.step_bytes(c, w) for w in self._greedy_words]
            for n in nexts:
                if n == DEAD or g + 1 >= best.get(n, INF):
                    continue
                e = h(n)
                if e >= INF:
                    continue
                best[n] = g + 1
                heapq.heappush(heap, (g + 1 + e, g + 1, n))
        return INF

    def _cost_of(self, config: Config) -> int:
        fin = self.fin
        best = INF
        for st in config:
            c = 0
            for q in st:
                c += fin[q]
                if c >= best:
                    break
            best = min(best, c)
        return best

    def need(self, cid: int) -> tuple[np.ndarray, int]:
        """(int32 per logits row: tokens to finish if that token is taken now, INF where it is
        not legal; the largest finite value) for the legal ordinary tokens of `cid`."""
        with self._lock:
            hit = self._need.get(cid)
            if hit is not None:
                self._need.move_to_end(cid)
                return hit
            targets = self.compiled.token_targets(cid)
            need = np.full(targets.shape, INF, dtype=np.int32)
            live = np.flatnonzero(targets != DEAD)
            if len(live):
                uniq, inv = np.unique(targets[live], return_inverse=True)
                costs = np.fromiter((self.config_cost(int(u)) for u in uniq), dtype=np.int64, count=len(uniq))
                need[live] = np.minimum(costs[inv] + 1, INF).astype(np.int32)
            finite = need[need < INF]
            hit = (need, int(finite.max()) if len(finite) else 0)
            self._need[cid] = hit
            if cid not in self._worst:
                self._computed += 1
            self._worst[cid] = hit[1]
            self._need_bytes += need.nbytes
            while self._need_bytes > NEED_CACHE_BYTES and len(self._need) > 1:
                _, (old, _) = self._need.popitem(last=False)
                self._need_bytes -= old.nbytes
            return hit

    def has_need(self, cid: int) -> bool:
        """Is `need(cid)` already computed?"""
        return cid in self._need

    def ready(self, cid: int, remaining: int) -> bool:
        """Is `narrow(cid, mask, remaining)` a lookup (its need computed, or known to fit)?"""
        if cid in self._need:
            return True
        worst = self._worst.get(cid)
        return worst is not None and worst <= remaining and not self.compiled.automaton.has_token_edges

    def narrow(self, cid: int, mask: np.ndarray, remaining: int) -> np.ndarray:
        """`mask` less the tokens after which no completion fits in `remaining - 1` more tokens.

        Returns `mask` itself when nothing is removed. End-of-generation tokens are kept
        (they finish the output); `<[N]>` token edges are checked one by one.
        """
        edges = self.compiled.automaton.has_token_edges
        known = self._worst.get(cid)
        if known is not None and known <= remaining and not edges:
            return mask
        need, worst = self.need(cid)
        if worst <= remaining and not edges:
            return mask
        narrowed = mask & (need <= remaining)
        eog = self.compiled.eog
        if len(eog):
            narrowed[eog] = mask[eog]
        if edges:
            others = mask & (need >= INF)  # legal only through a token edge (or end-of-generation)
            others[eog] = False
            for t in np.flatnonzero(others).tolist():
                nxt = self.compiled.step_token(cid, t)
                narrowed[t] = nxt != DEAD and 1 + self.config_cost(nxt) <= remaining
        if np.array_equal(narrowed, mask):
            return mask
        narrowed.setflags(write=False)
        return narrowed


def budget_for(compiled: CompiledGrammar) -> Budget:
    """The Budget of a CompiledGrammar, built on first use and kept with it."""
    return compiled.companion("budget", Budget)


def output_budget(least: int | None, max_tokens: int, *, end_token: bool = False) -> int | None:
    """How many tokens the output may take under `max_tokens`, the rule every loop keeps.

    `least` is `Matcher.min_tokens_to_complete()` at the start. None: the bound cannot
    count a completion (a vocabulary missing some bytes), so budget-aware closing is off
    and the output is cut plainly. With `end_token` the loop spends a token of its budget
    on end-of-generation after the output (llama-cpp-python's does; ministruct's decoder
    stops when the grammar is done). BudgetTooSmall, before anything is evaluated, when
    even the shortest completion does not fit."""
    if max_tokens < 0:
        raise UsageError(f"max_tokens must be >= 0, got {max_tokens}", parameter="max_tokens")
    if least is None:
        return None
    end = 1 if end_token else 0
    if least + end > max_tokens:
        raise BudgetTooSmall(max_tokens, least + end)
    return max_tokens - end
