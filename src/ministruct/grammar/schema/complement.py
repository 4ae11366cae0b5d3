"""Which of several regexes a string matches, as one DFA over code points.

Used for `patternProperties`: a key must be sorted into "matches exactly these
patterns" (including none of them), which needs the complements of the pattern
languages. Each component language is a rule-free IR expression (inline the rules
of a parsed regex first); the components are turned into one Thompson NFA over
code points, determinized on the fly (per state, the code-point space is split
into the disjoint intervals formed by the boundaries of its edges) and each DFA
state is labelled with the set of components it accepts. Since the DFA is
complete (the empty set of NFA states is a state of its own, looping on every code
point), the label of the state reached by a string tells exactly which components
match it: that is the complement construction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Optional

from ministruct.errors import GrammarError
from ministruct.grammar.ir import Alt, CharClass, Expr, Grammar, Literal, Repeat, Seq, normalize_ranges
from ministruct.grammar.regex.printer import inline_root

MAX_NFA_STATES = 50_000
MAX_DFA_STATES = 5_000
MAX_DFA_WORK = 300_000  # range ends gone through building a schema's automata (bounded work)


class ComplementError(ValueError):
    """The languages cannot be handled here (rules, tokens, too many states)."""


def inline_rules(g: Grammar) -> Expr:
    """The root expression of a non-recursive grammar with every RuleRef replaced."""
    try:
        return inline_root(g)
    except GrammarError as e:
        raise ComplementError(str(e)) from None


class _NFA:
    def __init__(self, limit: int) -> None:
        self.eps: list[list[int]] = []
        self.edges: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []
        self.limit = limit

    def new(self) -> int:
        if len(self.eps) >= self.limit:
            raise ComplementError(f"more than {self.limit} NFA states")
        self.eps.append([])
        self.edges.append([])
        return len(self.eps) - 1

    def build(self, e: Expr, s: int) -> int:
        """Add e starting at state s; return its end state."""
        if isinstance(e, Literal):
            for ch in e.text:
                t = self.new()
                self.edges[s].append((((ord(ch), ord(ch)),), t))
                s = t
            return s
        if isinstance(e, CharClass):
            t = self.new()
            rs = e.code_point_ranges()
            if rs:
                self.edges[s].append((rs, t))
            return t
        if isinstance(e, Seq):
            for x in e.items:
                s = self.build(x, s)
            return s
        if isinstance(e, Alt):
            end = self.new()
            for o in e.options:
                a = self.new()
                self.eps[s].append(a)
                self.eps[self.build(o, a)].append(end)
            return end
        if isinstance(e, Repeat):
            for _ in range(e.min):
                s = self.build(e.item, s)
            if e.max is None:
                head = self.new()
                self.eps[s].append(head)
                self.eps[self.build(e.item, head)].append(head)
                return head
            end = self.new()
            for _ in range(e.max - e.min):
                self.eps[s].append(end)
                a = self.new()
                self.eps[s].append(a)
                s = self.build(e.item, a)
            self.eps[s].append(end)
            return end
        raise ComplementError(f"unsupported expression {type(e).__name__}")


@dataclass
class KeyDFA:
    """states[i]: list of (code-point ranges, target state); labels[i]: the components
    accepting there; state 0 is the start; `free` is the state of the empty NFA set
    (no component can match any more: label empty, every code point loops), or None."""

    states: list[list[tuple[tuple[tuple[int, int], ...], int]]]
    labels: list[frozenset[int]]
    free: Optional[int]
    work: int = 0


def build_dfa(
    components: list[Expr],
    max_states: int = MAX_DFA_STATES,
    max_nfa: int = MAX_NFA_STATES,
    max_work: Optional[int] = None,
) -> KeyDFA:
    """One DFA for all component languages at once (each a full-match language). Its
    `work` is the count of range ends it went through (large classes, such as `\\w`
    over Unicode, make each state costly): past `max_work` (when given), ComplementError."""
    nfa = _NFA(max_nfa)
    start = nfa.new()
    accept: dict[int, int] = {}
    for i, e in enumerate(components):
        a = nfa.new()
        nfa.eps[start].append(a)
        accept.setdefault(nfa.build(e, a), i)
        # several components could end in one state only if built from the same state; never here
    closures: dict[frozenset[int], frozenset[int]] = {}

    def closure(seed: frozenset[int]) -> frozenset[int]:
        got = closures.get(seed)
        if got is not None:
            return got
        seen = set(seed)
        stack = list(seed)
        while stack:
            for t in nfa.eps[stack.pop()]:
                if t not in seen:
                    seen.add(t)
                    stack.append(t)
        out = frozenset(seen)
        closures[seed] = out
        return out

    index: dict[frozenset[int], int] = {}
    sets: list[frozenset[int]] = []

    def state(s: frozenset[int]) -> int:
        if s not in index:
            if len(sets) >= max_states:
                raise ComplementError(f"more than {max_states} DFA states")
            index[s] = len(sets)
            sets.append(s)
        return index[s]

    state(closure(frozenset([start])))
    trans: list[list[tuple[tuple[tuple[int, int], ...], int]]] = []
    i = 0
    work = 0
    while i < len(sets):
        cur = sets[i]
        events: dict[int, list[tuple[int, int]]] = {}
        for n in cur:
            for rs, t in nfa.edges[n]:
                work += len(rs)
                for a, b in rs:
                    events.setdefault(a, []).append((t, 1))
                    events.setdefault(b + 1, []).append((t, -1))
        groups: dict[int, list[tuple[int, int]]] = {}
        active: dict[int, int] = {}
        points = sorted(events)
        prev = 0
        for k, p in enumerate(points + [0x110000]):
            if p > prev:
                tgt = state(closure(frozenset(t for t, c in active.items() if c > 0)))
                groups.setdefault(tgt, []).append((prev, p - 1))
            if k < len(points):
                for t, d in events[p]:
                    active[t] = active.get(t, 0) + d
            prev = p
        trans.append([(normalize_ranges(rs), t) for t, rs in groups.items()])
        i += 1
        work += len(points)
        if max_work is not None and work > max_work:
            raise ComplementError(f"more than {max_work:,} steps to build its automaton")
    labels = [frozenset(accept[n] for n in s if n in accept) for s in sets]
    return KeyDFA(trans, labels, index.get(frozenset()), work)


def live_states(dfa: KeyDFA, good: set[int]) -> set[int]:
    """States from which some state in `good` can be reached."""
    back: dict[int, set[int]] = {}
    for s, edges in enumerate(dfa.states):
        for _, t in edges:
            back.setdefault(t, set()).add(s)
    live = set(good)
    stack = list(good)
    while stack:
        for s in back.get(stack.pop(), ()):
            if s not in live:
                live.add(s)
                stack.append(s)
    return live
