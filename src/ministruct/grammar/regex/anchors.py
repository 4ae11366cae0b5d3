"""Exact removal of `re` anchors (`^ $ \\A \\Z`) from a regex expression.

An anchor is a zero-width test of the context: what was consumed before it
(`\\A`, `^`) or what follows it (`\\Z`, `$`). We thread a small context automaton
through the expression (a product construction on expressions), replacing each
anchor by epsilon where it holds and by the empty language where it fails:

* forward pass, states F (nothing consumed yet) and U (something consumed):
  `\\A` and `^` hold in F and fail in U; MULTILINE `^` in U depends on the
  previous character and is refused.
* backward pass on the reversed expression, states E (nothing follows),
  N (exactly "\\n" follows) and O (anything else follows): `\\Z` holds in E;
  `$` holds in E and N (re's "before a final newline"); MULTILINE `$` in O
  depends on the next character and is refused.
"""

from __future__ import annotations

from dataclasses import dataclass

from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.ir import NOTHING, Alt, CharClass, Expr, Literal, Repeat, Seq, alt_some, seq_all, walk

EPS = Literal("")

_FORWARD = {"A", "start", "bol"}
_BACKWARD = {"Z", "end", "eol"}
# truth of each anchor per context state: True, False, or None (cannot be decided)
_TRUTH = {
    ("A", "F"): True,
    ("A", "U"): False,
    ("start", "F"): True,
    ("start", "U"): False,
    ("bol", "F"): True,
    ("bol", "U"): None,
    ("Z", "E"): True,
    ("Z", "N"): False,
    ("Z", "O"): False,
    ("end", "E"): True,
    ("end", "N"): True,
    ("end", "O"): False,
    ("eol", "E"): True,
    ("eol", "N"): True,
    ("eol", "O"): None,
}
_SINK = {"F": "U", "E": "O"}


@dataclass(frozen=True)
class Assert:
    """A zero-width anchor from the pattern: kind A/start/bol (look behind) or Z/end/eol."""

    kind: str
    text: str
    column: int
    line: int = 1


def has_assertions(e: Expr) -> bool:
    return any(isinstance(x, Assert) for x in walk(e))


# ---------------------------------------------------------------- language helpers


def _rep(x: Expr, m: int, n: int | None) -> Expr:
    if n == 0 or x == EPS:
        return EPS
    if x == NOTHING:
        return EPS if m == 0 else NOTHING
    if (m, n) == (1, 1):
        return x
    return Repeat(x, m, n)


def _dec(n: int | None, k: int = 1) -> int | None:
    return None if n is None else n - k


def eps_part(e: Expr) -> Expr:
    """The zero-width paths of `e`: EPS, NOTHING, or a combination of anchors."""
    if isinstance(e, Literal):
        return EPS if e.text == "" else NOTHING
    if isinstance(e, Assert):
        return e
    if isinstance(e, Seq):
        return seq_all(*[eps_part(x) for x in e.items])
    if isinstance(e, Alt):
        return alt_some(*[eps_part(x) for x in e.options])
    if isinstance(e, Repeat):
        if e.max == 0:
            return EPS
        ep = eps_part(e.item)
        return alt_some(EPS, ep) if e.min == 0 else ep
    return NOTHING  # CharClass


def nonempty(e: Expr) -> Expr:
    """The paths of `e` that consume at least one character."""
    if isinstance(e, Literal):
        return NOTHING if e.text == "" else e
    if isinstance(e, Assert):
        return NOTHING
    if isinstance(e, Seq):
        a, rest = e.items[0], seq_all(*e.items[1:])
        return alt_some(seq_all(nonempty(a), rest), seq_all(eps_part(a), nonempty(rest)))
    if isinstance(e, Alt):
        return alt_some(*[nonempty(x) for x in e.options])
    if isinstance(e, Repeat):
        if e.max == 0:
            return NOTHING
        x, ep, nx = e.item, eps_part(e.item), nonempty(e.item)
        if ep == EPS:
            return seq_all(nx, _rep(x, 0, _dec(e.max)))
        first = seq_all(nx, _rep(x, max(e.min - 1, 0), _dec(e.max)))
        if ep == NOTHING or (e.max is not None and e.max < 2):
            return first
        return alt_some(first, seq_all(ep, nx, _rep(x, 0, _dec(e.max, 2))))
    return e  # CharClass


def _contains(e: Expr, ch: str) -> bool:
    """Is the one-character string `ch` in the (anchor-free) language of `e`?"""
    if isinstance(e, Literal):
        return e.text == ch
    if isinstance(e, CharClass):
        cp = ord(ch)
        return any(a <= cp <= b for a, b in e.code_point_ranges())
    if isinstance(e, Seq):
        a, rest = e.items[0], seq_all(*e.items[1:])
        return (eps_part(a) == EPS and _contains(rest, ch)) or (_contains(a, ch) and eps_part(rest) == EPS)
    if isinstance(e, Alt):
        return any(_contains(x, ch) for x in e.options)
    if isinstance(e, Repeat):
        return e.max != 0 and _contains(e.item, ch) and (e.min <= 1 or eps_part(e.item) == EPS)
    return False


def _without(e: Expr, ch: str) -> Expr:
    """The (anchor-free) language of `e` minus the one-character string `ch`."""
    if not _contains(e, ch):
        return e
    if isinstance(e, Literal):
        return NOTHING
    if isinstance(e, CharClass):
        cp = ord(ch)
        out = []
        for a, b in e.code_point_ranges():
            if a <= cp <= b:
                out += [(a, cp - 1)] if a < cp else []
                out += [(cp + 1, b)] if cp < b else []
            else:
                out.append((a, b))
        return CharClass(tuple(out)) if out else NOTHING
    if isinstance(e, Alt):
        return alt_some(*[_without(x, ch) for x in e.options])
    if isinstance(e, Seq):
        a, rest = e.items[0], seq_all(*e.items[1:])
        parts = [seq_all(_without(nonempty(a), ch), rest)]
        if eps_part(a) == EPS:
            parts.append(_without(rest, ch))
        if _contains(a, ch):
            parts.append(seq_all(Literal(ch), nonempty(rest)))
        return alt_some(*parts)
    assert isinstance(e, Repeat)
    return alt_some(eps_part(e), _without(nonempty(e), ch))


def reverse(e: Expr) -> Expr:
    if isinstance(e, Literal):
        return Literal(e.text[::-1])
    if isinstance(e, Seq):
        return Seq(tuple(reverse(x) for x in reversed(e.items)))
    if isinstance(e, Alt):
        return Alt(tuple(reverse(x) for x in e.options))
    if isinstance(e, Repeat):
        return Repeat(reverse(e.item), e.min, e.max)
    return e


# ---------------------------------------------------------------- the product construction


class _Pass:
    def __init__(self, kinds: set[str], source: str, text: str) -> None:
        self.kinds, self.source, self.text = kinds, source, text
        self.memo: dict[tuple[int, str], tuple[Expr, dict[str, Expr]]] = {}

    def relevant(self, e: Expr) -> bool:
        return any(isinstance(x, Assert) and x.kind in self.kinds for x in walk(e))

    def split(self, e: Expr, s: str) -> dict[str, Expr]:
        """Context-state outcomes of an expression without anchors of this pass."""
        if s in ("U", "O"):
            return {s: e}
        if s in ("F", "N"):
            return {s: eps_part(e), _SINK.get(s, "O"): nonempty(e)}
        ne = nonempty(e)
        nl = Literal("\n") if _contains(ne, "\n") else NOTHING
        return {"E": eps_part(e), "N": nl, "O": _without(ne, "\n")}

    def run(self, e: Expr, s: str) -> dict[str, Expr]:
        key = (id(e), s)
        hit = self.memo.get(key)
        if hit is not None:
            return hit[1]
        out = {k: v for k, v in self._run(e, s).items() if v != NOTHING}
        self.memo[key] = (e, out)
        return out

    def _run(self, e: Expr, s: str) -> dict[str, Expr]:
        if not self.relevant(e):
            return self.split(e, s)
        if isinstance(e, Assert):
            truth = _TRUTH[(e.kind, s)]
            if truth is None:
                self.refuse(e)
            return {s: EPS} if truth else {}
        if isinstance(e, Alt):
            out: dict[str, Expr] = {}
            for o in e.options:
                for q, x in self.run(o, s).items():
                    out[q] = alt_some(out.get(q, NOTHING), x)
            return out
        if isinstance(e, Seq):
            cur: dict[str, Expr] = {s: EPS}
            for item in e.items:
                nxt: dict[str, Expr] = {}
                for q, x in cur.items():
                    for q2, y in self.run(item, q).items():
                        nxt[q2] = alt_some(nxt.get(q2, NOTHING), seq_all(x, y))
                cur = {q: x for q, x in nxt.items() if x != NOTHING}
            return cur
        assert isinstance(e, Repeat)
        return self.repeat(e.item, e.min, e.max, s)

    def repeat(self, x: Expr, m: int, n: int | None, s: str) -> dict[str, Expr]:
        """x{m,n} entered in state s: leading zero-width rounds, one move, then the rest."""
        if n == 0:
            return {s: EPS}
        tx = self.run(x, s)
        if s in ("U", "O"):
            return {s: _rep(tx.get(s, NOTHING), m, n)}
        stay = tx.get(s, NOTHING)
        out: dict[str, Expr] = {s: alt_some(EPS, stay) if m == 0 else stay}
        for q, move in tx.items():
            if q == s:
                continue
            if stay == EPS:
                tails = [(EPS, 0, _dec(n))]
            else:
                tails = [(EPS, max(m - 1, 0), _dec(n))]
                if stay != NOTHING and (n is None or n >= 2):
                    tails.append((stay, 0, _dec(n, 2)))
            for pre, lo, hi in tails:
                rest = self.repeat(x, lo, hi, q) if hi != 0 else {q: EPS}
                for q2, y in rest.items():
                    out[q2] = alt_some(out.get(q2, NOTHING), seq_all(pre, move, y))
        return {q: v for q, v in out.items() if v != NOTHING}

    def refuse(self, a: Assert) -> None:
        where = "at the start of the pattern" if a.kind == "bol" else "at the end of the pattern"
        raise GrammarSyntaxError(
            f"anchor {a.text} at column {a.column} with the MULTILINE flag is only supported {where}",
            source=self.source,
            text=self.text,
            line=a.line,
            column=a.column,
        )


def eliminate_assertions(e: Expr, *, source: str = "<regex>", text: str | None = None) -> Expr:
    """An anchor-free expression with the same full-match language as `e`."""
    fwd = _Pass(_FORWARD, source, text or "")
    if fwd.relevant(e):
        e = alt_some(*fwd.run(e, "F").values())
    bwd = _Pass(_BACKWARD, source, text or "")
    if bwd.relevant(e):
        e = reverse(alt_some(*bwd.run(reverse(e), "E").values()))
    return e
