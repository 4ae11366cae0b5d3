"""Grammar IR -> a Python `re` pattern with the same full-match language."""

from __future__ import annotations

from ministruct.errors import GrammarError
from ministruct.grammar.ir import MAX_CODE_POINT, Alt, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, Seq, TokenRef


def _char(cp: int) -> str:
    """One code point as regex text that means exactly that code point, flags or not."""
    ch = chr(cp)
    if cp < 0x80:
        if ch.isalnum() or ch == "_":
            return ch
        if 0x20 < cp < 0x7F:
            return "\\" + ch
        return f"\\x{cp:02x}"
    if not ch.isprintable() or 0xD800 <= cp <= 0xDFFF:
        return f"\\U{cp:08x}" if cp > 0xFFFF else f"\\u{cp:04x}"
    return ch


def _class(c: CharClass) -> str:
    ranges = c.code_point_ranges()
    if not ranges:
        return f"[^\\x00-\\U{MAX_CODE_POINT:08x}]"  # matches nothing
    if len(ranges) == 1 and ranges[0][0] == ranges[0][1]:
        return _char(ranges[0][0])
    negated = CharClass(ranges, negated=True).code_point_ranges()
    if negated and len(negated) < len(ranges):
        return "[^" + _ranges(negated) + "]"
    return "[" + _ranges(ranges) + "]"


def _ranges(ranges: tuple[tuple[int, int], ...]) -> str:
    return "".join(_char(a) if a == b else f"{_char(a)}-{_char(b)}" for a, b in ranges)


def _quant(lo: int, hi: int | None) -> str:
    if (lo, hi) == (0, None):
        return "*"
    if (lo, hi) == (1, None):
        return "+"
    if (lo, hi) == (0, 1):
        return "?"
    if hi is None:
        return f"{{{lo},}}"
    return f"{{{lo}}}" if lo == hi else f"{{{lo},{hi}}}"


def _fmt(e: Expr, ctx: str) -> str:
    """ctx: 'alt' (anywhere), 'seq' (an element of a sequence), 'atom' (under a quantifier)."""
    if isinstance(e, Literal):
        text = "".join(_char(ord(c)) for c in e.text)
        return f"(?:{text})" if ctx == "atom" and len(e.text) != 1 else text
    if isinstance(e, CharClass):
        return _class(e)
    if isinstance(e, Seq):
        text = "".join(_fmt(x, "seq") for x in e.items)
        return f"(?:{text})" if ctx == "atom" else text
    if isinstance(e, Alt):
        text = "|".join(_fmt(x, "alt") for x in e.options)
        return text if ctx == "alt" else f"(?:{text})"
    if isinstance(e, Repeat):
        if e.max == 0:
            return "(?:)" if ctx == "atom" else ""
        text = _fmt(e.item, "atom") + _quant(e.min, e.max)
        return f"(?:{text})" if ctx == "atom" else text
    raise TypeError(f"not an expression: {e!r}")


def _inline(grammar: Grammar, name: str, path: tuple[str, ...], done: dict[str, Expr]) -> Expr:
    if name in done:
        return done[name]
    if name in path:
        cycle = " -> ".join(path[path.index(name) :] + (name,))
        raise GrammarError(
            f"rule {name} is recursive ({cycle}); a regex cannot express it", source=grammar.source, rule=name
        )
    if name not in grammar.rules:
        raise GrammarError(f"rule {name} is not defined", source=grammar.source, rule=name)

    def sub(e: Expr) -> Expr:
        if isinstance(e, RuleRef):
            return _inline(grammar, e.name, path + (name,), done)
        if isinstance(e, TokenRef):
            what = f"<[{e.token_id}]>" if e.token_id is not None else str(e.name)
            raise GrammarError(
                f"rule {name} matches the whole token {what}; a regex cannot express it",
                source=grammar.source,
                rule=name,
            )
        if isinstance(e, Seq):
            return Seq(tuple(sub(x) for x in e.items))
        if isinstance(e, Alt):
            return Alt(tuple(sub(x) for x in e.options))
        if isinstance(e, Repeat):
            return Repeat(sub(e.item), e.min, e.max)
        return e

    done[name] = sub(grammar.rules[name])
    return done[name]


def inline_root(grammar: Grammar) -> Expr:
    """The root expression with every rule reference replaced by its body; GrammarError
    for recursion, undefined rules and token references."""
    return _inline(grammar, grammar.root, (), {})


def grammar_to_regex(grammar: Grammar) -> str:
    """A Python regex for a non-recursive grammar (rules inlined); GrammarError otherwise."""
    return _fmt(inline_root(grammar), "alt")
