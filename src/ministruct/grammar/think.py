"""Free text first, then a constraint: `OPEN? FREE CLOSE answer` as one exact grammar.

FREE is any text that does not contain CLOSE: the free text ends at the first CLOSE
of the output, whatever came before it (a CLOSE whose prefix recurs, `abab`, included),
and the answer grammar holds from the first byte after it. The language is regular in
the free part, so it is built exactly, without recursion: the string-matching automaton
of CLOSE (Knuth-Morris-Pratt, over code points; UTF-8 keeps code point and byte matching
the same) turned into one expression by state elimination. OPEN adds nothing to that
language (OPEN FREE is FREE) and is kept in the Boundary for the prompt and the records.

CLOSE may also be one control token of the vocabulary (Qwen3's `</think>`, a TokenRef):
then FREE is any text and CLOSE is the token atom (the engine never allows a control
token the grammar does not name). With a grammar for the free part (`free`), the output
is `OPEN? free CLOSE answer`; the free text then ends where CLOSE first follows a
complete `free` text.

`may_end_in_free_text`: the output may also end in the free text (tool choice `auto`:
free text that ends the generation, or the trigger and then a call).
"""

from __future__ import annotations

import dataclasses
from collections import defaultdict

from ministruct.grammar.ir import (
    EMPTY,
    Alt,
    Boundary,
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
from ministruct.grammar.limits import fresh_namer

ANY_TEXT: Expr = Repeat(CharClass((), negated=True), 0, None)


def free_text_then(
    answer: Grammar,
    *,
    close: str | TokenRef,
    open: str | None = None,
    free: Grammar | None = None,
    may_end_in_free_text: bool = False,
) -> Grammar:
    """The grammar of free text, then CLOSE, then an `answer` text (see the module doc).

    `close`: the text, or one control token (a TokenRef), that ends the free text.
    `open`: the text that announces it (optional in the output; never containing CLOSE).
    `free`: a grammar for the free text instead of any text without CLOSE.
    The result's root is `root`; the answer's rules keep their names (its root is renamed
    when it is called `root`), the free grammar's rules are prefixed `think-`."""
    if isinstance(close, str) and not close:
        raise ValueError("close must be a non-empty text")
    if open is not None and isinstance(close, str) and close in open:
        raise ValueError(f"open ({open!r}) contains close ({close!r}): the free text would end at once")
    if answer.boundary is not None:
        raise ValueError("the answer already starts with free text (free_text_then applied twice)")
    rules: dict[str, Expr] = {}
    fresh = fresh_namer({**answer.rules, "root": EMPTY})
    answer_root = answer.root if answer.root != "root" else fresh("answer")
    rules.update(_renamed(answer.rules, {"root": answer_root} if answer.root == "root" else {}))
    tail: Expr = RuleRef(answer_root)
    close_atom: Expr = close if isinstance(close, TokenRef) else Literal(close)
    if free is not None:
        names = {n: f"think-{n}" for n in free.rules}
        clash = set(names.values()) & set(rules)
        names = {n: (fresh(v) if v in clash else v) for n, v in names.items()}
        rules.update(_renamed(free.rules, names))
        head: Expr = RuleRef(names[free.root])
        body = seq(head, close_atom, tail)
        root = alt(body, head) if may_end_in_free_text else body
        if open is not None:
            root = seq(Repeat(Literal(open), 0, 1), root)
    elif isinstance(close, TokenRef):
        body = seq(ANY_TEXT, close, tail)
        root = alt(body, ANY_TEXT) if may_end_in_free_text else body
    else:
        to_close, to_end = text_without(close)
        body = seq(to_close, tail)
        root = alt(body, to_end) if may_end_in_free_text else body
    boundary = Boundary(close, open, may_end_in_free_text, free is not None)
    return Grammar(
        {"root": root, **rules},
        root="root",
        source=answer.source,
        warnings=list(answer.warnings) + (list(free.warnings) if free else []),
        boundary=boundary,
    )


def text_without(close: str) -> tuple[Expr, Expr]:
    """(texts whose first `close` is at their end, texts that do not contain `close`)."""
    cps = [ord(c) for c in close]
    n = len(cps)
    delta = kmp_table(close)
    # states 0..n-1 (the longest prefix of CLOSE the text ends with); n: CLOSE seen ("F");
    # n+1: the text ends here ("E"); n+2: the start
    F, E, S = n, n + 1, n + 2
    edges: dict[tuple[int, int], Expr] = {(S, 0): EMPTY}
    for j in range(n):
        moves = delta[j]
        by_target: dict[int, list[int]] = defaultdict(list)
        for c, k in moves.items():
            by_target[k].append(c)
        for k, cs in by_target.items():
            edges[(j, k)] = CharClass(tuple((c, c) for c in sorted(cs)))
        edges[(j, 0)] = _alt_opt(edges.get((j, 0)), CharClass(tuple((c, c) for c in sorted(moves)), negated=True))
        edges[(j, E)] = EMPTY
    for q in range(n - 1, -1, -1):  # forward edges go j -> j+1 only: eliminate from the end
        loop = edges.pop((q, q), None)
        star: Expr = Repeat(loop, 0, None) if loop is not None else EMPTY
        ins = [(i, e) for (i, k), e in edges.items() if k == q]
        outs = [(k, e) for (i, k), e in edges.items() if i == q]
        for i, _ in ins:
            del edges[(i, q)]
        for k, _ in outs:
            del edges[(q, k)]
        for i, ei in ins:
            for k, ek in outs:
                edges[(i, k)] = _alt_opt(edges.get((i, k)), seq(ei, star, ek))
    return edges[(S, F)], edges[(S, E)]


def kmp_table(close: str) -> list[dict[int, int]]:
    """For each state j < len(close) (the text ends with close[:j]), the code points that
    lead to a state other than 0, and that state (len(close): CLOSE complete)."""
    cps = [ord(c) for c in close]
    n = len(cps)
    fail = [0] * (n + 1)
    k = 0
    for i in range(1, n):
        while k and cps[i] != cps[k]:
            k = fail[k]
        if cps[i] == cps[k]:
            k += 1
        fail[i + 1] = k
    distinct = sorted(set(cps))
    table: list[dict[int, int]] = []
    for j in range(n):
        moves: dict[int, int] = {}
        for c in distinct:
            s = j
            while s and cps[s] != c:
                s = fail[s]
            t = s + 1 if cps[s] == c else 0
            if t:
                moves[c] = t
        table.append(moves)
    return table


def _alt_opt(a: Expr | None, b: Expr) -> Expr:
    return b if a is None else alt(a, b)


def _renamed(rules: dict[str, Expr], names: dict[str, str]) -> dict[str, Expr]:
    """The rules with rule names (definitions and references) replaced by `names`."""
    if not names:
        return dict(rules)
    memo: dict[int, Expr] = {}

    def go(e: Expr) -> Expr:
        hit = memo.get(id(e))
        if hit is not None:
            return hit
        out: Expr
        if isinstance(e, RuleRef):
            out = RuleRef(names.get(e.name, e.name))
        elif isinstance(e, Seq):
            out = Seq(tuple(go(x) for x in e.items))
        elif isinstance(e, Alt):
            out = Alt(tuple(go(x) for x in e.options))
        elif isinstance(e, Repeat):
            out = dataclasses.replace(e, item=go(e.item))
        else:
            out = e
        memo[id(e)] = out
        return out

    return {names.get(n, n): go(b) for n, b in rules.items()}


def split_free_text(boundary: Boundary, text: str) -> tuple[str, str] | None:
    """(the free text without OPEN, the text after CLOSE) of a whole output, or None when
    the output has no CLOSE (a control token CLOSE is looked for by its text)."""
    close = boundary.close_text
    i = text.find(close)
    if i < 0:
        return None
    free = text[:i]
    if boundary.open and free.startswith(boundary.open):
        free = free[len(boundary.open) :]
    return free, text[i + len(close) :]


__all__ = ["ANY_TEXT", "free_text_then", "kmp_table", "split_free_text", "text_without"]
