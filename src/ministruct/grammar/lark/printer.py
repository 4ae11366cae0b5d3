"""Grammar IR -> Lark text (llguidance's dialect) with the same language: `grammar_to_lark`.

A rule whose language is regular (no recursion, no token atoms, only such rules used)
becomes a TERMINAL, so a greedy lexer (llguidance's) reads it as one lexeme with
exactly its language; the other rules stay rules (lowercase, `start` for the root). A
literal is a JSON string, a character class a one-character `/regex/`, token atoms
`<[N]>`, `<[^N]>` and `<|name|>`. There is no `%ignore`, so the context-free language
is exactly the IR's; a greedy lexer can still reject some of its strings where one
lexeme of a rule may run into the next (docs/constraints.md "Two readings"). A grammar
read from Lark with greedy lexemes prints its lexemes as terminals and its skip as
`%ignore`: it reads back the same.
"""

from __future__ import annotations

import re

from ministruct.errors import GrammarError
from ministruct.grammar.analysis import reachable_rules
from ministruct.grammar.ir import EMPTY, Alt, CharClass, Expr, Grammar, Literal, Repeat, RuleRef, Seq, TokenRef, walk
from ministruct.grammar.regex.printer import _class as regex_class

_JSON_ESC = {'"': '\\"', "\\": "\\\\", "\n": "\\n", "\r": "\\r", "\t": "\\t", "\b": "\\b", "\f": "\\f"}


def lark_string(text: str) -> str:
    """A Lark string literal (JSON syntax) for `text`."""
    out = []
    for ch in text:
        cp = ord(ch)
        if ch in _JSON_ESC:
            out.append(_JSON_ESC[ch])
        elif cp < 0x20 or cp == 0x7F or 0xD800 <= cp <= 0xDFFF:
            out.append(f"\\u{cp:04x}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def regular_rules(g: Grammar) -> set[str]:
    """The rules whose language is regular as written: no recursion, no token atoms, and
    only such rules referenced."""
    refs = {n: [x.name for x in walk(b) if isinstance(x, RuleRef)] for n, b in g.rules.items()}
    tokens = {n for n, b in g.rules.items() if any(isinstance(x, TokenRef) for x in walk(b))}
    state: dict[str, bool] = {}
    for top in g.rules:
        stack: list[tuple[str, int]] = [(top, 0)]
        on_path: set[str] = set()
        while stack:
            n, i = stack.pop()
            if n in state and i == 0:
                continue
            if i == 0:
                on_path.add(n)
            kids = refs.get(n, [])
            if i < len(kids):
                stack.append((n, i + 1))
                k = kids[i]
                if k in on_path:
                    state[k] = False
                elif k not in state and k in g.rules:
                    stack.append((k, 0))
                continue
            on_path.discard(n)
            state[n] = n not in tokens and all(state.get(k, False) for k in kids)
    return {n for n, ok in state.items() if ok}


def _names(g: Grammar, terminals: set[str]) -> dict[str, str]:
    names: dict[str, str] = {g.root: "start"}
    used = {"start"}
    for n in ([g.root] if g.root in terminals else []) + [n for n in g.rules if n != g.root]:
        if n in terminals:
            base = re.sub(r"[^A-Z0-9_]", "_", n.upper())
            if not base[:1].isalpha():
                base = "T_" + base
        else:
            base = re.sub(r"[^a-z0-9_]", "_", n.lower())
            if not base[:1].isalpha():
                base = "r_" + base
        name, k = base, 1
        while name in used:
            name, k = f"{base}_{k}", k + 1
        used.add(name)
        names[n if n != g.root else TERMINAL_ROOT] = name
    return names


TERMINAL_ROOT = "\x00root"  # the terminal holding a regular root's language


def _token(t: TokenRef, rule: str, source: str) -> str:
    if t.token_id is not None:
        return f"<[^{t.token_id}]>" if t.negated else f"<[{t.token_id}]>"
    if t.negated:
        raise GrammarError(
            f"rule {rule} negates the token {t.name} by its text; Lark can negate token ids only (<[^N]>)",
            source=source,
            rule=rule,
        )
    return str(t.name)


def _quant(r: Repeat) -> str:
    if (r.min, r.max) == (0, None):
        return "*"
    if (r.min, r.max) == (1, None):
        return "+"
    if (r.min, r.max) == (0, 1):
        return "?"
    if r.max is None:
        return f"{{{r.min},}}"
    return f"{{{r.min}}}" if r.min == r.max else f"{{{r.min},{r.max}}}"


def _fmt(e: Expr, names: dict[str, str], rule: str, source: str, atom: bool = False) -> str:
    if isinstance(e, Literal):
        return lark_string(e.text)
    if isinstance(e, CharClass):
        rs = e.code_point_ranges()
        if len(rs) == 1 and rs[0][0] == rs[0][1]:
            return lark_string(chr(rs[0][0]))
        return "/" + regex_class(e) + "/"
    if isinstance(e, RuleRef):
        return names[e.name]
    if isinstance(e, TokenRef):
        return _token(e, rule, source)
    if isinstance(e, Repeat):
        if e.max == 0 or e.item == EMPTY:
            return '""'
        inner = _fmt(e.item, names, rule, source, atom=True)
        if isinstance(e.item, Repeat) and inner != '""':
            inner = f"({inner})"  # Lark's quantifiers do not stack
        return inner + _quant(e)
    if isinstance(e, Seq):
        text = " ".join(_fmt(x, names, rule, source, atom=isinstance(x, Alt)) for x in e.items)
        return f"({text})" if atom else text
    if isinstance(e, Alt):
        text = " | ".join(_fmt(x, names, rule, source) for x in e.options)
        return f"({text})" if atom else text
    raise TypeError(f"not an expression: {e!r}")


def _lexeme_terminals(g: Grammar) -> set[str]:
    """With greedy lexemes (Grammar.lexer): the lexeme rules and the rules inside them, each
    regular (a lexeme that is not, such as a %json value, cannot be printed as one)."""
    assert g.lexer is not None
    regular = regular_rules(g)
    inside = reachable_rules(g, roots=sorted(g.lexer.lexemes - g.lexer.lazy))
    lazy_inside = reachable_rules(g, roots=sorted(g.lexer.lazy)) - set(g.lexer.lazy)
    for n in sorted((inside | lazy_inside) - regular):
        raise GrammarError(
            f"rule {n} is inside a lexeme and is not regular as written (a %json value, `&` or `~`, a lazy "
            "lexeme): Lark cannot print it as a terminal",
            source=g.source,
            rule=n,
        )
    return inside | lazy_inside


def grammar_to_lark(grammar: Grammar) -> str:
    """Lark text for `grammar`: its root as `start`, then the other rules in order. A
    grammar with greedy lexemes (read from Lark) prints its lexemes as terminals and its
    skip as `%ignore`, so that Lark text reads back the same."""
    lex = grammar.lexer
    terminals = regular_rules(grammar) if lex is None else _lexeme_terminals(grammar)
    names = _names(grammar, terminals)
    order = [grammar.root] + [n for n in grammar.rules if n != grammar.root]
    lines = []
    if lex is not None and lex.initial_skip:
        lines.append('%llguidance {"allow_initial_skip": true}\n')
    for n in order:
        body = _fmt(grammar.rules[n], names, n, grammar.source)
        if lex is not None and n in lex.lazy:
            lines.append(f"{names[n]}[lazy]: {body}\n")
        elif n == grammar.root and n in terminals:
            lines.append(f"start: {names[TERMINAL_ROOT]}\n")
            lines.append(f"{names[TERMINAL_ROOT]}: {body}\n")
        else:
            lines.append(f"{names[n]}: {body}\n")
    if lex is not None and lex.top_skip is not None:
        lines.append(f"%ignore {names[lex.top_skip]}\n")
    return "".join(lines)
