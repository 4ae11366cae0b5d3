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
from typing import Callable

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
    max_free: int | None = None,
) -> Grammar:
    """The grammar of free text, then CLOSE, then an `answer` text (see the module doc).

    `close`: the text, or one control token (a TokenRef), that ends the free text.
    `open`: the text that announces it (optional in the output; never containing CLOSE).
    `free`: a grammar for the free text instead of any text without CLOSE.
    `max_free`: a bound on the free text's length in the grammar itself, for engines that
    cannot count tokens (a llama server): at most that many code points before CLOSE.
    The result's root is `root`; the answer's rules keep their names (its root is renamed
    when it is called `root`), the free grammar's rules are prefixed `think-`."""
    if isinstance(close, str) and not close:
        raise ValueError("close must be a non-empty text")
    if open is not None and isinstance(close, str) and close in open:
        raise ValueError(f"open ({open!r}) contains close ({close!r}): the free text would end at once")
    if max_free is not None and (max_free < 0 or free is not None):
        raise ValueError("max_free must be >= 0, and applies to free text without a grammar of its own")
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
        text = ANY_TEXT if max_free is None else Repeat(CharClass((), negated=True), 0, max_free)
        body = seq(text, close, tail)
        root = alt(body, text) if may_end_in_free_text else body
    else:
        loop, to_close, to_end = text_pieces(close)
        exit_: Expr = seq(to_close, tail)
        if may_end_in_free_text:
            exit_ = alt(exit_, to_end)
        if max_free is None:
            root = seq(Repeat(loop, 0, None), exit_)
        else:
            root = _bounded_text_then(close, max_free, tail, may_end_in_free_text, rules, fresh)
    boundary = Boundary(close, open, may_end_in_free_text, free is not None)
    return Grammar(
        {"root": root, **rules},
        root="root",
        source=answer.source,
        warnings=list(answer.warnings) + (list(free.warnings) if free else []),
        boundary=boundary,
        lexer=answer.lexer,  # (a Lark answer's lexemes stay greedy; the free text is no lexeme)
    )


def text_without(close: str) -> tuple[Expr, Expr]:
    """(texts whose first `close` is at their end, texts that do not contain `close`)."""
    loop, to_close, to_end = text_pieces(close)
    star = Repeat(loop, 0, None)
    return seq(star, to_close), seq(star, to_end)


def text_not_starting_with(prefix: str) -> Expr:
    """Every text that does not begin with `prefix` (the empty text included)."""
    if not prefix:
        raise ValueError("prefix must be a non-empty text")
    options: list[Expr] = []
    for k, c in enumerate(prefix):
        options.append(Literal(prefix[:k]))
        options.append(seq(Literal(prefix[:k]), CharClass(((ord(c), ord(c)),), negated=True), ANY_TEXT))
    return alt(*options)


def text_pieces(close: str) -> tuple[Expr, Expr, Expr]:
    """The text without `close` as pieces of the matching automaton: (a way back to its
    start: one code point that does not begin `close`, or a false start of it; from the
    start, the rest up to the end of the first `close`; from the start, a text that ends
    before any `close`). texts_without's are loop* then one of the others."""
    cps = [ord(c) for c in close]
    n = len(cps)
    delta = kmp_table(close)
    # states 0..n-1 (the longest prefix of CLOSE the text ends with); n: CLOSE seen ("F");
    # n+1: the text ends here ("E")
    F, E = n, n + 1
    edges: dict[tuple[int, int], Expr] = {}
    for j in range(n):
        moves = delta[j]
        by_target: dict[int, list[int]] = defaultdict(list)
        for c, k in moves.items():
            by_target[k].append(c)
        for k, cs in by_target.items():
            edges[(j, k)] = CharClass(tuple((c, c) for c in sorted(cs)))
        edges[(j, 0)] = _alt_opt(edges.get((j, 0)), CharClass(tuple((c, c) for c in sorted(moves)), negated=True))
        edges[(j, E)] = EMPTY
    for q in range(n - 1, 0, -1):  # forward edges go j -> j+1 only: eliminate from the end
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
    return edges[(0, 0)], edges[(0, F)], edges[(0, E)]


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


def _bounded_text_then(
    close: str, n: int, tail: Expr, may_end: bool, rules: dict[str, Expr], fresh: Callable[[str], str]
) -> Expr:
    """At most `n` code points without `close`, then `close` and `tail`: one right-linear
    rule per (matched length of `close`, code points left for the free text and `close`),
    the matching automaton run with a counter that keeps room for the rest of `close`."""
    table = kmp_table(close)
    size = len(close)
    names: dict[tuple[int, int], str] = {}
    pending: list[tuple[int, int]] = []

    def ref(j: int, k: int) -> Expr:
        if (j, k) not in names:
            names[(j, k)] = fresh(f"think-free-{j}")
            pending.append((j, k))
        return RuleRef(names[(j, k)])

    root = ref(0, n + size)
    while pending:
        j, k = pending.pop()
        by_target: dict[int, list[int]] = defaultdict(list)
        for c, t in table[j].items():
            if t == size or k - 1 >= size - t:
                by_target[t].append(c)
        options: list[Expr] = []
        for t, cs in sorted(by_target.items()):
            cls = CharClass(tuple((c, c) for c in sorted(cs)))
            options.append(seq(cls, tail) if t == size else seq(cls, ref(t, k - 1)))
        if k - 1 >= size:
            options.append(seq(CharClass(tuple((c, c) for c in sorted(table[j])), negated=True), ref(0, k - 1)))
        if may_end:
            options.append(EMPTY)
        rules[names[(j, k)]] = alt(*options)
    return root


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


__all__ = [
    "ANY_TEXT",
    "free_text_then",
    "kmp_table",
    "split_free_text",
    "text_not_starting_with",
    "text_pieces",
    "text_without",
]
