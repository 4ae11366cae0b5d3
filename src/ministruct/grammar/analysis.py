"""Static checks on a Grammar: undefined rules, missing root, left recursion, unreachable
and unproductive rules (the last pruned away).

llama.cpp refuses undefined rules, a missing start rule and left recursion
(llama_grammar_detect_left_recursion); ministruct does the same, and finds left
recursion through every nullable prefix (llama.cpp only sees rules with an empty
alternative as nullable). Unreachable rules are only a warning.
"""

from __future__ import annotations

from typing import Callable, Iterable

from ministruct.errors import GrammarError
from ministruct.grammar.ir import (
    EMPTY,
    Alt,
    CharClass,
    Expr,
    Grammar,
    Literal,
    Repeat,
    RuleRef,
    Seq,
    TokenRef,
    alt,
    seq,
)


def _nullable(e: Expr, nullable: set[str]) -> bool:
    t = type(e)
    if t is RuleRef:
        return e.name in nullable  # type: ignore[union-attr]
    if t is Literal:
        return e.text == ""  # type: ignore[union-attr]
    if t is CharClass or t is TokenRef:
        return False
    if t is Seq:
        for x in e.items:  # type: ignore[union-attr]
            if not _nullable(x, nullable):
                return False
        return True
    if t is Alt:
        for x in e.options:  # type: ignore[union-attr]
            if _nullable(x, nullable):
                return True
        return False
    if t is Repeat:
        return e.min == 0 or _nullable(e.item, nullable)  # type: ignore[union-attr]
    raise TypeError(f"not an expression: {e!r}")


def is_nullable(e: Expr, nullable: set[str]) -> bool:
    """Can `e` match the empty string, given the names of the nullable rules?"""
    return _nullable(e, nullable)


def nullable_rules(grammar: Grammar, refs: "dict[str, list[str]] | None" = None) -> set[str]:
    """Names of the rules that can match the empty string (undefined rules count as not)."""
    if refs is None:
        refs = {n: _ordered_refs(e) for n, e in grammar.rules.items()}
    users: dict[str, list[str]] = {}
    for name, used in refs.items():
        for r in used:
            users.setdefault(r, []).append(name)
    out: set[str] = set()
    todo = list(grammar.rules)
    todo.reverse()
    while todo:  # a rule is looked at again only when a rule it uses turns out nullable
        name = todo.pop()
        if name not in out and _nullable(grammar.rules[name], out):
            out.add(name)
            todo.extend(u for u in users.get(name, ()) if u not in out)
    return out


def _left_refs(e: Expr, nullable: set[str], out: dict[str, None]) -> None:
    """Add the rules `e` can start with (after a nullable prefix), in order of appearance."""
    t = type(e)
    if t is RuleRef:
        out[e.name] = None  # type: ignore[union-attr]
    elif t is Seq:
        for x in e.items:  # type: ignore[union-attr]
            _left_refs(x, nullable, out)
            if not _nullable(x, nullable):
                break
    elif t is Alt:
        for x in e.options:  # type: ignore[union-attr]
            _left_refs(x, nullable, out)
    elif t is Repeat and e.max != 0:  # type: ignore[union-attr]
        _left_refs(e.item, nullable, out)  # type: ignore[union-attr]


def left_refs(e: Expr, nullable: set[str]) -> list[str]:
    """The rules `e` can start with (after a nullable prefix), in order of appearance."""
    out: dict[str, None] = {}
    _left_refs(e, nullable, out)
    return list(out)


def left_corner_graph(grammar: Grammar, refs: "dict[str, list[str]] | None" = None) -> dict[str, list[str]]:
    """For each rule, the rules that can be expanded first without consuming input."""
    nullable = nullable_rules(grammar, refs)
    graph: dict[str, list[str]] = {}
    for name, expr in grammar.rules.items():
        refs: dict[str, None] = {}
        _left_refs(expr, nullable, refs)
        graph[name] = [r for r in refs if r in grammar.rules]
    return graph


def find_left_recursion(grammar: Grammar, refs: "dict[str, list[str]] | None" = None) -> list[str] | None:
    """A left-recursive cycle as a list of rule names (first == last), or None."""
    graph = left_corner_graph(grammar, refs)
    return first_cycle(graph, lambda name: graph[name])


def first_cycle(starts: Iterable[str], successors: Callable[[str], Iterable[str]]) -> list[str] | None:
    """A cycle of a directed graph reachable from `starts` (nodes, first == last), or None;
    depth first, without recursion."""
    state: dict[str, int] = {}  # 1 = on the current path, 2 = done
    for start in starts:
        if start in state:
            continue
        path = [start]
        iters = [iter(successors(start))]
        state[start] = 1
        while iters:
            nxt = next(iters[-1], None)
            if nxt is None:
                state[path.pop()] = 2
                iters.pop()
                continue
            st = state.get(nxt)
            if st == 1:
                return path[path.index(nxt) :] + [nxt]
            if st is None:
                state[nxt] = 1
                path.append(nxt)
                iters.append(iter(successors(nxt)))
    return None


def productive_rules(rules: dict[str, Expr]) -> set[str]:
    """Names of the rules that derive at least one finite string (undefined rules do not)."""
    good: set[str] = set()

    def ok(e: Expr) -> bool:
        t = type(e)
        if t is RuleRef:
            return e.name in good  # type: ignore[union-attr]
        if t is CharClass:
            return bool(e.ranges) or e.negated  # type: ignore[union-attr]
        if t is Literal or t is TokenRef:
            return True
        if t is Repeat:
            return e.min == 0 or ok(e.item)  # type: ignore[union-attr]
        if t is Seq:
            return all(ok(x) for x in e.items)  # type: ignore[union-attr]
        return any(ok(x) for x in e.options)  # type: ignore[union-attr]

    changed = True
    while changed:
        changed = False
        for name, body in rules.items():
            if name not in good and ok(body):
                good.add(name)
                changed = True
    return good


def prune_unproductive(rules: dict[str, Expr], productive: set[str] | None = None) -> dict[str, Expr]:
    """The rules without the unproductive ones: a reference to one is a dead end, so the
    alternatives through it go (the language is the same; no rule refers to itself
    without ever ending). A rule left with nothing is dropped."""
    good = productive_rules(rules) if productive is None else productive
    if len(good) == len(rules):
        return rules
    dead = CharClass(())
    done: dict[int, Expr] = {}  # by identity: an expression shared by many rules is pruned once

    def is_dead(e: Expr) -> bool:
        return type(e) is CharClass and not e.ranges and not e.negated  # type: ignore[union-attr]

    def prune(e: Expr) -> Expr:
        t = type(e)
        if t is RuleRef:
            return e if e.name in good else dead  # type: ignore[union-attr]
        if t is not Seq and t is not Alt and t is not Repeat:
            return e
        got = done.get(id(e))
        if got is not None:
            return got
        if t is Seq:
            items = [prune(x) for x in e.items]  # type: ignore[union-attr]
            unchanged = all(a is b for a, b in zip(items, e.items))  # type: ignore[union-attr]
            got = dead if any(is_dead(x) for x in items) else e if unchanged else seq(*items)
        elif t is Alt:
            pruned = [prune(x) for x in e.options]  # type: ignore[union-attr]
            live = [x for x in pruned if not is_dead(x)]
            unchanged = len(live) == len(pruned) and all(a is b for a, b in zip(live, e.options))  # type: ignore[union-attr]
            got = e if unchanged else alt(*live) if live else dead
        else:
            item = prune(e.item)  # type: ignore[union-attr]
            if is_dead(item):
                got = EMPTY if e.min == 0 else dead  # type: ignore[union-attr]
            else:
                got = e if item is e.item else Repeat(item, e.min, e.max)  # type: ignore[union-attr]
        done[id(e)] = got  # (the rules keep `e` alive: its id is not reused meanwhile)
        return got

    return {name: prune(body) for name, body in rules.items() if name in good}


def reachable_rules(
    grammar: Grammar, refs: dict[str, list[str]] | None = None, roots: "list[str] | None" = None
) -> set[str]:
    """Rules reachable from the root, or from each of `roots` (those included when defined)."""
    if refs is None:
        refs = {n: _ordered_refs(e) for n, e in grammar.rules.items()}
    seen: set[str] = set()
    todo = [r for r in (roots if roots is not None else [grammar.root]) if r in grammar.rules]
    while todo:
        n = todo.pop()
        if n in seen:
            continue
        seen.add(n)
        todo.extend(r for r in refs.get(n, ()) if r in grammar.rules and r not in seen)
    return seen


def check_grammar(grammar: Grammar, refs: "dict[str, list[str]] | None" = None) -> Grammar:
    """Raise GrammarError for an unusable grammar; append warnings for unreachable rules.

    `refs` (each rule's references, in order, without repeats) saves a walk when known.
    """
    src = grammar.source
    try:
        if not grammar.rules:
            raise GrammarError("the grammar defines no rules", source=src)
        if refs is None:
            refs = {name: _ordered_refs(expr) for name, expr in grammar.rules.items()}
        for name, used in refs.items():
            for r in used:
                if r not in grammar.rules:
                    raise GrammarError(f"undefined rule '{r}' (used in rule '{name}')", source=src, rule=name)
        if grammar.root not in grammar.rules:
            raise GrammarError(f"no rule named '{grammar.root}' (the start rule)", source=src, rule=grammar.root)
        cycle = find_left_recursion(grammar, refs)
        if cycle is not None:
            raise GrammarError(
                "left recursion: " + " -> ".join(cycle) + " (llama.cpp rejects it too; use repetition instead)",
                source=src,
                rule=cycle[0],
            )
        reach = reachable_rules(grammar, refs)
        if grammar.lexer is not None:  # (skip lexemes are the lexer's: no rule refers to them)
            lex = grammar.lexer
            skips = {skip for name, skip in lex.skip if name in reach}
            reach |= reachable_rules(grammar, refs, roots=sorted(skips | {lex.top_skip} - {None}))
    except RecursionError:
        raise GrammarError("grammar nested too deeply to analyse", source=src) from None
    known = set(grammar.warnings)
    for name in grammar.rules:
        if name not in reach:
            msg = f"rule '{name}' is unreachable from '{grammar.root}'"
            if msg not in known:
                grammar.warnings.append(msg)
    return grammar


def _ordered_refs(e: Expr) -> list[str]:
    """Rule names referenced by `e`, left to right, without duplicates."""
    out: dict[str, None] = {}
    stack = [e]
    while stack:
        x = stack.pop()
        t = type(x)
        if t is RuleRef:
            out[x.name] = None  # type: ignore[union-attr]
        elif t is Seq:
            stack.extend(x.items[::-1])  # type: ignore[union-attr]
        elif t is Alt:
            stack.extend(x.options[::-1])  # type: ignore[union-attr]
        elif t is Repeat:
            stack.append(x.item)  # type: ignore[union-attr]
    return list(out)
