"""Grammar IR -> byte-level pushdown automaton, and its parser configurations.

Every rule becomes a piece of one NFA over bytes, with call edges for rule
references and token edges for `<[N]>` (built by nfa.py's NfaBuilder). A *stack* is a tuple of NFA states (the
return points, then the current state); a *configuration* is the frozenset of
stacks the parser may be in after some bytes, each stack's top sitting on a state
that consumes input. The empty stack `()` in a configuration means "the root rule
is complete". `Automaton.step(config, byte)` is exact and is what both whole-text
checks and the token-mask engine (compile.py) are built on.
"""

from __future__ import annotations

from collections import OrderedDict

from ministruct.engine.merge_states import merge_equivalent_states
from ministruct.engine.nfa import MAX_NFA_STATES, NfaBuilder, TokenEdge, estimate_size, rule_refs
from ministruct.errors import CompileLimitError, GrammarError
from ministruct.grammar.ir import (
    Expr,
    Grammar,
    gc_paused,
    normalize_ranges,
)

MAX_STACKS = 4_096
MAX_LOCAL_DEPTH = 512
MAX_LOCAL_STACKS = 100_000

Stack = tuple[int, ...]
Config = frozenset  # frozenset[Stack]
ACCEPT: Stack = ()


class Automaton(NfaBuilder):
    """The byte-level pushdown automaton of one grammar."""

    def __init__(self, grammar: Grammar) -> None:
        # building allocates millions of small lists that are never cyclic garbage: with the
        # cyclic collector running, its full passes over them made big grammars quadratic
        with gc_paused():
            self._construct(grammar)

    def _construct(self, grammar: Grammar) -> None:
        if grammar.root not in grammar.rules:
            raise GrammarError(f"no rule named '{grammar.root}' to start from", source=grammar.source)
        self.grammar = grammar
        self.byte_edges: list[list[tuple[int, int, int]]] = []
        self.eps: list[list[int]] = []
        self.calls: list[list[tuple[str, int]]] = []
        self.token_edges: list[list[TokenEdge]] = []
        self.start: dict[str, int] = {}
        self.final: set[int] = set()
        # the rule each state was built for (index into rule_names), for position tags
        self.rule_names: list[str] = list(grammar.rules)
        self.rule_of: list[int] = []
        self._building = 0
        self.hidden_parent: dict[str, str] = {}  # a shared repeat item's rule -> the rule that made it
        total = sum(estimate_size(e) for e in grammar.rules.values())
        if total > 10 * MAX_NFA_STATES:  # an over-estimate (shared items counted per use)
            raise CompileLimitError(
                f"{grammar.source}: grammar too large to compile (about {total:,} automaton states; "
                f"the limit is {MAX_NFA_STATES:,}); reduce repetition bounds"
            )
        self._shared: dict[Expr, str] = {}
        # per bounded repeat: (first state of each copy's block, end, min, max, item nullable)
        self.repeat_blocks: list[tuple[list[int], int, int, int | None, bool]] = []
        self.loop_entries: list[int] = []  # where each unbounded repeat's loop starts (an item's next copy)
        from ministruct.grammar.analysis import is_nullable, nullable_rules

        self._nullable_rules = nullable_rules(grammar)
        self._expr_nullable = is_nullable
        for i, name in enumerate(grammar.rules):
            self._building = i
            self.start[name] = self._new()
        ends: dict[str, int] = {}
        for i, (name, body) in enumerate(grammar.rules.items()):
            self._building = i
            end = ends[name] = self._new()
            self.final.add(end)
            self._build(body, self.start[name], end)
        for name, body in grammar.rules.items():
            for ref in rule_refs(body):
                if ref not in grammar.rules:
                    raise GrammarError(
                        f"rule '{ref}' is used in '{name}' but never defined", source=grammar.source, rule=ref
                    )
        self._trim()
        marked = {self.rule_names.index(n) for n in grammar.marks if n in grammar.rules}
        self._set_lexer(grammar, ends)
        marked |= self._lexeme_rules
        self.kept_frame = [r in marked for r in self.rule_of] if marked else None
        if self.greedy:  # (contexts that differ only in alike return points are one configuration)
            merge_equivalent_states(self)
        self._local: dict[int, tuple[tuple[Stack, ...], bool]] = {}
        self._tail_call: dict[int, bool] = {}  # return state -> does a call returning there drop its caller's frame
        self._target_cache: dict[int, tuple[int, ...]] = {}
        self._closure_cache: OrderedDict[Stack, frozenset] = OrderedDict()
        # states whose closure is the stack itself: they consume, and reach nothing without input
        self._bare = {
            q
            for q in range(len(self.eps))
            if self.consumes(q) and not self.eps[q] and not self.calls[q] and q not in self.final
        }
        self._resolved: OrderedDict[Config, Config] = OrderedDict()
        self._ends_text: dict[Stack, bool] = {}  # end marker -> does the text end with its lexeme
        initial = self.closure((self.start[grammar.root],))
        if self.greedy and grammar.lexer is not None and grammar.lexer.initial_skip:
            initial = self._with_skips(initial, 0)
        self.initial: Config = initial
        self.has_token_edges = any(self.token_edges)

    def _set_lexer(self, grammar: Grammar, ends: dict[str, int]) -> None:
        """Greedy lexemes (Grammar.lexer): the end state of each lexeme rule (lexeme_end:
        end state -> lazy?), each lexeme rule's class, each class's skip start and parent."""
        lex = grammar.lexer
        self.greedy = lex is not None
        self.lexeme_end: dict[int, bool] = {}
        self._lexeme_rules: set[int] = set()
        self._lexeme_class: dict[int, int] = {}  # lexeme rule index -> its class (absent: 0)
        self._class_skip: list[int | None] = [None]  # class -> its skip lexeme's start state
        self._class_parent: list[int] = [-1]
        self._class_cache: dict[Stack, int] = {}  # stack -> _class_of
        self._any_lazy = False
        if lex is None:
            return
        for name in lex.lexemes:
            if name in ends:
                self.lexeme_end[ends[name]] = name in lex.lazy
                self._lexeme_rules.add(self.rule_names.index(name))
        self._any_lazy = any(self.lexeme_end.values())
        if lex.classes:
            for name, k in lex.classes:
                if name in ends:
                    self._lexeme_class[self.rule_names.index(name)] = k
            self._class_skip = [self.start.get(x) if x else None for x in lex.class_skips]
            self._class_parent = list(lex.class_parents)
        elif lex.top_skip is not None:
            self._class_skip = [self.start.get(lex.top_skip)]

    def canonical_states(self, max_token_len: int) -> dict[int, int]:
        """Map states of a repeat's copies to a representative copy with the same mask.

        With more than L copies (L = the longest token, in bytes) still to go before
        the repeat's minimum, or before its maximum, no single token can reach that
        bound, so every such copy allows exactly the same tokens. The representative is
        the first such copy: a walk inside a token moves on into later copies, which map
        back to it. Items that can be empty are left alone (their copies can be crossed
        without input).
        """
        L = max_token_len
        maps: list[dict[int, int]] = []
        for blocks, end, m, n, nullable in self.repeat_blocks:
            if nullable:
                continue
            bounds = blocks + [end]
            sizes = {bounds[i + 1] - bounds[i] for i in range(len(blocks) - 1)}
            if len(sizes) != 1:
                continue
            size = sizes.pop()
            if bounds[-1] - bounds[-2] < size:
                continue
            f: dict[int, int] = {}
            far_mandatory = [k for k in range(min(m, len(blocks))) if m - k - 1 > L]
            far_optional = [k for k in range(m, len(blocks)) if n is not None and n - k - 1 > L]
            for ks in (far_mandatory, far_optional):
                if len(ks) < 2:
                    continue
                rep = blocks[min(ks)]
                for k in ks:
                    if blocks[k] != rep:
                        for off in range(size):
                            f[blocks[k] + off] = rep + off
            if f:
                maps.append(f)
        if not maps:
            return {}
        out: dict[int, int] = {}
        keys = set().union(*maps)
        ordered = maps[::-1]  # outer repeats were registered after the ones inside them
        for q in keys:
            x = q
            for f in ordered:
                x = f.get(x, x)
            if x != q:
                out[q] = x
        return out

    # ------------------------------------------------------------ closure

    def consumes(self, q: int) -> bool:
        return bool(self.byte_edges[q] or self.token_edges[q])

    def _pure_final(self, q: int) -> bool:
        """q can only end its rule: no input, no call is reachable from it."""
        seen, todo, final = set(), [q], False
        while todo:
            x = todo.pop()
            if x in seen:
                continue
            seen.add(x)
            if self.byte_edges[x] or self.token_edges[x] or self.calls[x]:
                return False
            final = final or x in self.final
            todo.extend(self.eps[x])
        return final

    def _drops_frame(self, ret: int) -> bool:
        """A call in tail position (returning to `ret`, which can only end its rule) drops
        its caller's frame, unless the caller is a marked rule: position tags read every
        marked rule off the stack."""
        hit = self._tail_call.get(ret)
        if hit is None:
            hit = self._tail_call[ret] = self._pure_final(ret) and not (self.kept_frame and self.kept_frame[ret])
        return hit

    def local(self, q: int) -> tuple[tuple[Stack, ...], bool]:
        """Relative stacks reachable from q without input, and whether q's rule can end."""
        hit = self._local.get(q)
        if hit is not None:
            return hit
        results: set[Stack] = set()
        can_end = False
        seen: set[Stack] = set()
        todo: list[Stack] = [(q,)]
        while todo:
            rel = todo.pop()
            if rel in seen:
                continue
            seen.add(rel)
            if len(seen) > MAX_LOCAL_STACKS:
                raise CompileLimitError(
                    f"{self.grammar.source}: grammar too ambiguous: more than {MAX_LOCAL_STACKS:,} ways "
                    "to reach the next input without consuming any (nested repeats of empty-able items?)"
                )
            if len(rel) > MAX_LOCAL_DEPTH:
                if len(set(rel)) == len(rel):  # no rule called again: a long chain, no recursion
                    raise CompileLimitError(
                        f"{self.grammar.source}: rules nested more than {MAX_LOCAL_DEPTH} deep before their "
                        "first character (a chain of rules, each starting with the next)"
                    )
                raise GrammarError(
                    "left recursion: a rule can reach itself without consuming input",
                    source=self.grammar.source,
                )
            top = rel[-1]
            if self.consumes(top):
                results.add(rel)
            for x in self.eps[top]:
                todo.append(rel[:-1] + (x,))
            for name, ret in self.calls[top]:
                if self._drops_frame(ret):
                    todo.append(rel[:-1] + (self.start[name],))
                else:
                    todo.append(rel[:-1] + (ret, self.start[name]))
            if top in self.final:
                if top in self.lexeme_end:  # a lexeme may end here: its end marker stays
                    results.add(rel)
                elif len(rel) == 1:
                    can_end = True
                else:
                    todo.append(rel[:-1])
        out = (tuple(sorted(results)), can_end)
        self._local[q] = out
        return out

    def closure(self, stack: Stack) -> frozenset:
        """All stacks with a consuming top (or ACCEPT) reachable from `stack` without input."""
        if stack and stack[-1] in self._bare:
            return frozenset((stack,))
        hit = self._closure_cache.get(stack)
        if hit is not None:
            return hit
        out: set[Stack] = set()
        base = stack
        while base:
            rels, can_end = self.local(base[-1])
            head = base[:-1]
            for rel in rels:
                out.add(head + rel)
            if not can_end:
                break
            base = head
        else:
            out.add(ACCEPT)
        res = frozenset(out)
        if len(self._closure_cache) > 200_000:
            self._closure_cache.popitem(last=False)
        self._closure_cache[stack] = res
        return res

    # ------------------------------------------------------------ stepping

    def _targets(self, q: int, byte: int) -> tuple[int, ...]:
        key = (q << 8) | byte
        hit = self._target_cache.get(key)
        if hit is None:
            hit = tuple(sorted({t for lo, hi, t in self.byte_edges[q] if lo <= byte <= hi}))
            self._target_cache[key] = hit
        return hit

    def step(self, config: Config, byte: int) -> Config:
        """The configuration after one more byte (empty when the byte is not allowed).

        With greedy lexemes: the stacks that go on with the byte, when any does (every
        lexeme that might end here dies); else the byte starts the next lexeme, after
        the lexemes that end here (`resolve`)."""
        cont = self._step_stacks(config, byte)
        if not self.greedy:
            return cont
        if cont:
            return self.settle(cont)
        if self.has_markers(config):
            return self.settle(self._step_stacks(self.resolve(config), byte))
        return cont

    # ------------------------------------------------------------ greedy lexemes

    def is_marker(self, st: Stack) -> bool:
        """Is this stack a lexeme's end marker (the lexeme may end here)?"""
        return bool(st) and st[-1] in self.lexeme_end

    def has_markers(self, config: Config) -> bool:
        lexeme_end = self.lexeme_end
        return bool(lexeme_end) and any(st and st[-1] in lexeme_end for st in config)

    def resolve(self, config: Config) -> Config:
        """The configuration after the lexemes that may end here have ended: every end
        marker returned (its caller goes on to its next lexemes, or the text is complete),
        with the skips allowed there. Stacks inside a lexeme are dropped."""
        hit = self._resolved.get(config)
        if hit is not None:
            return hit
        out: set[Stack] = set()
        ended = 0  # (lexemes of several classes ending at once: the innermost grammar's)
        for st in config:
            if st and st[-1] in self.lexeme_end:
                out |= self.closure(st[:-1])
                ended = max(ended, self._lexeme_class.get(self.rule_of[st[-1]], 0))
        res = self._with_skips(frozenset(out), ended)
        if len(self._resolved) > 100_000:
            self._resolved.popitem(last=False)
        self._resolved[config] = res
        return res

    def settle(self, config: Config) -> Config:
        """A lazy lexeme ends at its first match: where one may end, it does, and the
        other candidates die."""
        if not self._any_lazy:
            return config
        lazy = [st for st in config if st and self.lexeme_end.get(st[-1])]
        return self.resolve(frozenset(lazy)) if lazy else config

    def _class_of(self, st: Stack) -> int:
        """The class of the lexeme the stack `st` is reading (that of its innermost lexeme rule)."""
        classes = self._lexeme_class
        if not classes:
            return 0
        r = self.rule_of[st[-1]]
        if r in self._lexeme_rules:  # (most stacks: the top is in the lexeme rule itself)
            return classes.get(r, 0)
        hit = self._class_cache.get(st)
        if hit is None:
            hit = 0
            for q in reversed(st):
                r = self.rule_of[q]
                if r in self._lexeme_rules:
                    hit = classes.get(r, 0)
                    break
            if len(self._class_cache) > 100_000:
                self._class_cache.clear()
            self._class_cache[st] = hit
        return hit

    def _with_skips(self, boundary: Config, ended: int) -> Config:
        """A boundary between lexemes with its skip candidates (llguidance's): after a
        lexeme of class `ended`, that class's skip where a lexeme of the class may follow,
        else the skip of the nearest enclosing class whose lexemes may; when the skip ends,
        the parse is where it was (every stack of the boundary, the end of the text too)."""
        if not any(x is not None for x in self._class_skip):
            return boundary
        consumes, token_edges = self.consumes, self.token_edges
        if len(self._class_skip) == 1:  # (one class: its skip wherever some lexeme may follow)
            if not any(st and (consumes(st[-1]) or token_edges[st[-1]]) for st in boundary):
                return boundary
            rels = self.local(self._class_skip[0])[0]  # type: ignore[arg-type]
            return boundary | frozenset(st + rel for st in boundary for rel in rels)
        allowed = {self._class_of(st) for st in boundary if st and (consumes(st[-1]) or token_edges[st[-1]])}
        if not allowed:
            return boundary
        k = ended
        while k >= 0 and k not in allowed:
            k = self._class_parent[k]
        skip = self._class_skip[k] if k >= 0 else None
        if skip is None:
            return boundary
        rels = self.local(skip)[0]  # (a skip is a lexeme: its closure never returns past its marker)
        outer = {k}
        while self._class_parent[k] >= 0:
            k = self._class_parent[k]
            outer.add(k)
        class_of = self._class_of
        # (a grammar nested in class k's that has not read a lexeme yet is left, as llguidance
        # leaves it when it pops its grammar stack to the skip's class)
        kept = (
            [st for st in boundary if not st or class_of(st) in outer]
            if len(outer) < len(self._class_skip)
            else boundary
        )
        return boundary | frozenset(st + rel for st in kept for rel in rels)

    def is_terminated(self, config: Config) -> bool:
        """Complete, and nothing but the end can follow."""
        if config == frozenset({ACCEPT}):
            return True
        if not self.greedy or not self.has_markers(config):
            return False
        return all(self.is_marker(st) for st in config) and self.resolve(config) == frozenset({ACCEPT})

    def _step_stacks(self, config: Config, byte: int) -> Config:
        """Every stack stepped on its own."""
        first: frozenset | None = None
        out: set[Stack] | None = None
        cached, closure = self._target_cache, self.closure
        for st in config:
            if not st:
                continue
            ts = cached.get((st[-1] << 8) | byte)
            if ts is None:
                ts = self._targets(st[-1], byte)
            for t in ts:
                reached = closure(st[:-1] + (t,))
                if first is None:
                    first = reached
                elif out is None:
                    out = set(first)
                    out |= reached
                else:
                    out |= reached
        if out is None:
            if first is None:
                return frozenset()
            out = first
        if len(out) > MAX_STACKS:
            raise CompileLimitError(f"{self.grammar.source}: grammar too ambiguous: {len(out):,} parses alive at once")
        return out if isinstance(out, frozenset) else frozenset(out)

    def step_bytes(self, config: Config, data: bytes) -> Config:
        for b in data:
            if not config:
                break
            config = self.step(config, b)
        return config

    def step_token_edges(self, config: Config, token_id: int, resolve) -> Config:
        """Configuration after a whole token consumed through `<[N]>`-style edges.

        `resolve(edge)` gives the token id a named edge stands for (or None).
        """
        out: set[Stack] = set()
        if self.greedy and self.has_markers(config):
            config = config | self.resolve(config)  # (a token is no byte: the lexemes here end)
        for st in config:
            if not st:
                continue
            for edge in self.token_edges[st[-1]]:
                if token_matches(edge, token_id, resolve):
                    out |= self.closure(st[:-1] + (edge.target,))
        return self.settle(frozenset(out)) if self.greedy else frozenset(out)

    def is_accepting(self, config: Config) -> bool:
        """Is the text complete here (with greedy lexemes: once the lexemes here end)?"""
        if ACCEPT in config:
            return True
        if not self.greedy:
            return False
        hit = self._resolved.get(config)
        if hit is not None:
            return ACCEPT in hit
        # (skips add no ACCEPT: a lexeme that ends here completes the text when every frame
        # below it can end its rule, which is when its closure holds ACCEPT)
        lexeme_end, ends = self.lexeme_end, self._ends_text
        for st in config:
            if st and st[-1] in lexeme_end:
                ok = ends.get(st)
                if ok is None:
                    local = self.local
                    ok = all(local(q)[1] for q in reversed(st[:-1]))  # (the top frames fail first)
                    if len(ends) > 100_000:
                        ends.clear()
                    ends[st] = ok
                if ok:
                    return True
        return False

    def allowed_bytes(self, config: Config) -> list[tuple[int, int]]:
        """Byte ranges that can come next (merged), for error messages."""
        if self.greedy and self.has_markers(config):
            config = config | self.resolve(config)
        return list(normalize_ranges({(lo, hi) for st in config if st for lo, hi, _ in self.byte_edges[st[-1]]}))

    def byte_boundaries(self) -> list[int]:
        """Sorted byte values where some edge's range starts or ends (+1): byte classes."""
        cuts = {0, 256}
        for edges in self.byte_edges:
            for lo, hi, _ in edges:
                cuts.add(lo)
                cuts.add(hi + 1)
        return sorted(cuts)


def token_matches(edge: TokenEdge, token_id: int, resolve) -> bool:
    want = edge.token_id if edge.token_id is not None else resolve(edge)
    if want is None:
        return edge.negated
    return (token_id != want) if edge.negated else (token_id == want)


# ---------------------------------------------------------------- text checks

_AUTOMATA: OrderedDict[tuple, Automaton] = OrderedDict()


def automaton_for(grammar: Grammar) -> Automaton:
    """A cached Automaton for a grammar (keyed by its canonical text)."""
    key = (
        grammar.to_gbnf(),
        grammar.root,
        tuple(sorted(grammar.marks.items(), key=lambda kv: kv[0])),
        grammar.lexer.key() if grammar.lexer is not None else None,
    )
    hit = _AUTOMATA.get(key)
    if hit is None:
        hit = Automaton(grammar)
        _AUTOMATA[key] = hit
        if len(_AUTOMATA) > 64:
            _AUTOMATA.popitem(last=False)
    return hit


def _as_bytes(text: str | bytes) -> bytes:
    return text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text


def accepts(grammar: Grammar, text: str | bytes) -> bool:
    """Is the whole text a string of the grammar's language?"""
    a = automaton_for(grammar)
    return a.is_accepting(a.step_bytes(a.initial, _as_bytes(text)))


def accepts_prefix(grammar: Grammar, text: str | bytes) -> bool:
    """Can the text still be completed to a string of the language?"""
    a = automaton_for(grammar)
    return bool(a.step_bytes(a.initial, _as_bytes(text)))
