"""Grammar IR -> a byte-level NFA: the construction half of the pushdown automaton.

Every rule becomes a piece of one NFA over bytes (`NfaBuilder._build`), with call edges
for rule references and token edges for `<[N]>`; bounded repeats are laid out copy by
copy (their blocks recorded for `Automaton.canonical_states`), large repeated items are
shared as rules, and `_trim` drops every edge into a state that cannot finish its rule.
`Automaton` (automaton.py) is an `NfaBuilder` that then runs the NFA as a pushdown
automaton over parser configurations.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Iterable

from ministruct.engine.utf8 import utf8_sequences
from ministruct.errors import CompileLimitError, GrammarError
from ministruct.grammar.ir import (
    EMPTY,
    Alt,
    CharClass,
    Expr,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    TokenRef,
    alt,
    normalize_ranges,
)

MAX_NFA_STATES = 2_000_000
SHARE_ITEM_STATES = 6  # a repeated item this big is built once, as a rule, and called per copy
MAX_OPENED_OPTIONALS = 64  # optionals opened per alternation (see _open_optionals)


def _simplify_repeat(r: Repeat) -> Expr:
    """(x*){m,n} is x*; (x+){m,n} is x{m,}: keeps nested stars small."""
    inner = _simplify_repeat(r.item) if isinstance(r.item, Repeat) else r.item
    if r.max == 0:
        return Literal("")
    if isinstance(inner, Repeat) and inner.max is None and inner.min <= 1:
        if inner.min == 0:
            return Repeat(inner.item, 0, None)
        return Repeat(inner.item, r.min, None)
    return r if inner is r.item else Repeat(inner, r.min, r.max)


def _leading_atoms(e: Expr) -> list:
    """The items of a sequence in order, literals split into their UTF-8 bytes."""
    out: list = []
    for x in e.items if isinstance(e, Seq) else (e,):
        if isinstance(x, Literal):
            out.extend(x.text.encode("utf-8", "surrogatepass"))
        else:
            out.append(x)
    return out


def estimate_size(e: Expr, cache: dict | None = None) -> int:
    """Upper estimate of NFA states an expression needs (to refuse huge grammars early)."""
    if isinstance(e, Literal):
        return len(e.text.encode("utf-8", "surrogatepass")) + 1
    if isinstance(e, CharClass):
        return 4 * len(utf8_sequences(e.code_point_ranges())) + 2
    if isinstance(e, (RuleRef, TokenRef)):
        return 2
    if isinstance(e, Seq):
        return sum(estimate_size(x) for x in e.items) + 1
    if isinstance(e, Alt):
        return sum(estimate_size(x) for x in e.options) + 2
    if isinstance(e, Repeat):
        s = _simplify_repeat(e)
        if not isinstance(s, Repeat):
            return estimate_size(s)
        copies = s.min + 1 if s.max is None else max(s.max, 1)
        inner = estimate_size(s.item)
        if copies >= 2 and inner >= SHARE_ITEM_STATES:
            return inner + 2 * copies + 2  # one shared rule, called once per copy
        if inner * copies > MAX_NFA_STATES:
            return MAX_NFA_STATES + 1
        return inner * copies + 2
    raise TypeError(f"not an expression: {e!r}")


@dataclass(frozen=True)
class TokenEdge:
    token_id: int | None
    name: str | None
    negated: bool
    target: int


class NfaBuilder:
    """The construction of an Automaton's NFA (the states, their byte, empty, call and token edges)."""

    # ------------------------------------------------------------ building

    def _new(self) -> int:
        if len(self.eps) >= MAX_NFA_STATES:
            raise CompileLimitError(
                f"{self.grammar.source}: grammar too large to compile (more than {MAX_NFA_STATES:,} "
                "automaton states); reduce repetition bounds"
            )
        self.rule_of.append(self._building)
        self.byte_edges.append([])
        self.eps.append([])
        self.calls.append([])
        self.token_edges.append([])
        return len(self.eps) - 1

    def _build(self, e: Expr, s: int, t: int) -> None:
        """Add edges so that paths from s to t spell exactly the strings of e."""
        if isinstance(e, Literal):
            data = e.text.encode("utf-8", "surrogatepass")
            if not data:
                self.eps[s].append(t)
                return
            cur = s
            for i, b in enumerate(data):
                nxt = t if i == len(data) - 1 else self._new()
                self.byte_edges[cur].append((b, b, nxt))
                cur = nxt
        elif isinstance(e, CharClass):
            self._build_class(e, s, t)
        elif isinstance(e, Seq):
            cur = s
            for i, item in enumerate(e.items):
                nxt = t if i == len(e.items) - 1 else self._new()
                self._build(item, cur, nxt)
                cur = nxt
            if not e.items:
                self.eps[s].append(t)
        elif isinstance(e, Alt):
            self._build_alt(e, s, t)
        elif isinstance(e, Repeat):
            self._build_repeat(e, s, t)
        elif isinstance(e, RuleRef):
            self.calls[s].append((e.name, t))
        elif isinstance(e, TokenRef):
            self.token_edges[s].append(TokenEdge(e.token_id, e.name, e.negated, t))
        else:
            raise TypeError(f"not an expression: {e!r}")

    def _build_alt(self, e: Alt, s: int, t: int) -> None:
        # options share the path of their common leading items (literal bytes, equal
        # sub-expressions): 20,000 alternative words leave one parse alive, not 20,000
        shared: dict[tuple[int, object], int] = {}
        for atoms in _open_optionals([_leading_atoms(o) for o in _merge_single_chars(e.options)]):
            cur = s
            for atom in atoms:
                nxt = shared.get((cur, atom))
                if nxt is None:
                    nxt = self._new()
                    if isinstance(atom, int):
                        self.byte_edges[cur].append((atom, atom, nxt))
                    elif isinstance(atom, CharClass):  # (byte edges out of cur only: nothing leaks)
                        self._build_class(atom, cur, nxt)
                    else:  # a private entry state: what `atom` builds cannot leak into other options
                        a = self._new()
                        self.eps[cur].append(a)
                        self._build(atom, a, nxt)
                    shared[(cur, atom)] = nxt
                cur = nxt
            self.eps[cur].append(t)

    def _build_class(self, c: CharClass, s: int, t: int) -> None:
        # share prefixes of the byte-range sequences so each state has few edges
        trie: dict[tuple, int] = {}
        for seq_ in utf8_sequences(c.code_point_ranges()):
            cur = s
            for i, (lo, hi) in enumerate(seq_):
                if i == len(seq_) - 1:
                    self.byte_edges[cur].append((lo, hi, t))
                    break
                key = (cur, lo, hi)
                if key not in trie:
                    nxt = self._new()
                    self.byte_edges[cur].append((lo, hi, nxt))
                    trie[key] = nxt
                cur = trie[key]

    def _build_repeat(self, r: Repeat, s: int, t: int) -> None:
        e = _simplify_repeat(r)
        if not isinstance(e, Repeat):
            self._build(e, s, t)
            return
        copies = e.min + 1 if e.max is None else e.max
        item_rule = None
        if copies >= 2 and estimate_size(e.item) >= SHARE_ITEM_STATES:
            item_rule = self._shared_rule(e.item)

        def build_item(a: int, b: int) -> None:
            if item_rule is None:
                self._build(e.item, a, b)
            else:
                self.calls[a].append((item_rule, b))

        cur = s
        blocks: list[int] = []
        for _ in range(e.min):
            nxt = self._new()
            blocks.append(nxt)
            build_item(cur, nxt)
            cur = nxt
        if e.max is None:
            loop_in, loop_out = self._new(), self._new()
            self._register_blocks(blocks, e, item_rule)
            self.loop_entries.append(loop_in)
            self.eps[cur].append(loop_in)
            build_item(loop_in, loop_out)
            self.eps[loop_out].append(loop_in)
            self.eps[loop_out].append(t)
            self.eps[cur].append(t)
            return
        for _ in range(e.max - e.min):
            nxt = self._new()
            blocks.append(nxt)
            self.eps[cur].append(t)
            build_item(cur, nxt)
            cur = nxt
        self._register_blocks(blocks, e, item_rule)
        self.eps[cur].append(t)

    def _shared_rule(self, item: Expr) -> str:
        """A hidden rule for a repeated item, built once however often it is used."""
        name = self._shared.get(item)
        if name is None:
            name = f"\x00item{len(self._shared)}"
            self._shared[item] = name
            outer = self._building
            self.hidden_parent[name] = self.rule_names[outer]
            self.rule_names.append(name)
            self._building = len(self.rule_names) - 1
            self.start[name] = self._new()
            end = self._new()
            self.final.add(end)
            self._build(item, self.start[name], end)
            self._building = outer
        return name

    def _register_blocks(self, blocks: list[int], e: Repeat, item_rule: str | None) -> None:
        if len(blocks) > 2:
            nullable = self._expr_nullable(e.item, self._nullable_rules)
            self.repeat_blocks.append((blocks, len(self.eps), e.min, e.max, nullable))

    def _trim(self) -> None:
        """Drop edges into states that can never finish their rule, so every live stack completes."""
        n = len(self.eps)
        # q is live when a byte, empty or token edge leads to a live state, or a call does
        # whose return state and callee's start are both live (a backward search from the
        # final states: each edge is looked at when its far end becomes live)
        preds: list[list[int]] = [[] for _ in range(n)]
        returns_to: dict[int, list[tuple[int, int]]] = {}  # ret -> (q, callee's start)
        callers: dict[int, list[tuple[int, int]]] = {}  # callee's start -> (q, ret)
        start = self.start
        for q in range(n):
            for _, _, t in self.byte_edges[q]:
                preds[t].append(q)
            for t in self.eps[q]:
                preds[t].append(q)
            for e in self.token_edges[q]:
                preds[e.target].append(q)
            for name, ret in self.calls[q]:
                s0 = start[name]
                returns_to.setdefault(ret, []).append((q, s0))
                callers.setdefault(s0, []).append((q, ret))
        live = [False] * n
        todo = list(self.final)
        for q in todo:
            live[q] = True
        while todo:
            t = todo.pop()
            for q in preds[t]:
                if not live[q]:
                    live[q] = True
                    todo.append(q)
            for q, other in returns_to.get(t, ()):
                if not live[q] and live[other]:
                    live[q] = True
                    todo.append(q)
            for q, other in callers.get(t, ()):
                if not live[q] and live[other]:
                    live[q] = True
                    todo.append(q)
        if not live[self.start[self.grammar.root]]:
            raise GrammarError(
                f"rule '{self.grammar.root}' matches no string: its language is empty (or its recursion never ends)",
                source=self.grammar.source,
                rule=self.grammar.root,
            )
        affected: set[int] = set()  # (the states with an edge into a dead one: most grammars have few)
        for t in range(n):
            if not live[t]:
                affected.update(preds[t])
                affected.update(q for q, _ in returns_to.get(t, ()))
                affected.update(q for q, _ in callers.get(t, ()))
        for q in affected:
            if self.byte_edges[q]:
                self.byte_edges[q] = [e for e in self.byte_edges[q] if live[e[2]]]
            if self.eps[q]:
                self.eps[q] = [t for t in self.eps[q] if live[t]]
            if self.token_edges[q]:
                self.token_edges[q] = [e for e in self.token_edges[q] if live[e.target]]
            if self.calls[q]:
                self.calls[q] = [(nm, r) for nm, r in self.calls[q] if live[r] and live[self.start[nm]]]


def _one_char_ranges(e: Expr) -> tuple[tuple[int, int], ...] | None:
    """The code points of an expression that is exactly one character, else None."""
    if isinstance(e, CharClass):
        return e.code_point_ranges()
    if isinstance(e, Literal) and len(e.text) == 1 and not 0xD800 <= ord(e.text) <= 0xDFFF:
        return ((ord(e.text), ord(e.text)),)
    return None


def _merge_single_chars(options: tuple[Expr, ...]) -> tuple[Expr, ...]:
    """Options that are one character each (classes, one-character literals) as one class,
    in the place of the first: `"_" | [A-Z] | [a-z]` then leaves one parse alive per
    character, not one per option. A one-character literal that begins a longer literal
    option stays apart (it shares that option's first byte already)."""
    leading = {atoms[0] for o in options if _one_char_ranges(o) is None for atoms in (_leading_atoms(o),) if atoms}
    picked = [
        i
        for i, o in enumerate(options)
        if _one_char_ranges(o) is not None and not (isinstance(o, Literal) and o.text.encode("utf-8")[0] in leading)
    ]
    if len(picked) < 2:
        return options
    ranges = [r for i in picked for r in _one_char_ranges(options[i])]  # type: ignore[union-attr]
    merged = CharClass(normalize_ranges(ranges))
    dropped = set(picked[1:])
    return tuple(merged if i == picked[0] else o for i, o in enumerate(options) if i not in dropped)


def _optional_body(x: object) -> Expr | None:
    """What `x` matches besides the empty string, when `x` is an optional (`x?`, `x | ""`)."""
    if isinstance(x, Repeat) and x.min == 0 and x.max == 1:
        return x.item
    if isinstance(x, Alt) and EMPTY in x.options:
        rest = [o for o in x.options if o != EMPTY]
        return alt(*rest) if rest else None
    return None


def _open_optionals(options: list[list]) -> list[list]:
    """Options as atom lists, where an optional item that a sibling option begins with at
    the same place (after the same atoms) is opened into both of its cases: `"[" test? "]"`
    beside `"[" test "for" ...` is `"[" test "]"` and `"[" "]"`, so the two share one call
    of `test` (else each nesting of `[` keeps both calls alive, doubling the parses)."""
    if len(options) < 2 or not any(
        not isinstance(x, int) and _optional_body(x) is not None for a in options for x in a
    ):
        return options
    out = [list(a) for a in options]
    child: dict[tuple[int, object], int] = {}  # (node, atom) -> node: the options as a trie of atoms

    def add(atoms: list) -> None:
        node = 0
        for x in atoms:
            node = child.setdefault((node, x), len(child) + 1)

    for a in out:
        add(a)
    opened = i = 0
    while i < len(out) and opened < MAX_OPENED_OPTIONALS:
        a, node = out[i], 0
        for k, x in enumerate(a):
            body = None if isinstance(x, int) else _optional_body(x)
            inner = _leading_atoms(body) if body is not None else None
            if inner and (node, inner[0]) in child:
                out[i : i + 1] = [a[:k] + inner + a[k + 1 :], a[:k] + a[k + 1 :]]
                add(out[i])
                add(out[i + 1])
                opened += 1
                break
            node = child[(node, x)]
        else:
            i += 1
    return [list(a) for a in dict.fromkeys(map(tuple, out))]  # (a case may be a sibling already)


def rule_refs(e: Expr) -> Iterable[str]:
    from ministruct.grammar.ir import walk

    for x in walk(e):
        if isinstance(x, RuleRef):
            yield x.name
