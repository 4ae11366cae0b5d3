"""Lazy lexemes: llguidance's `lazy`, `suffix` and `stop` on a rule whose body is terminals.

Such a rule is one lexeme (no `%ignore` gap inside it) that ends at its first match:

    lazy          the texts of the body B none of whose proper prefixes is in B
    suffix=M      the same for B M: the text ends where the body is first followed by M,
                  and M is part of the text (`r[suffix="b"]: /[a-z]*/` then "c": `aabc`,
                  not `abbc`)
    stop=M        the language of suffix=M. llguidance also hides M from the model by
                  backtracking its tokens; ministruct never takes tokens back, so M stays
                  in the output, as text the grammar dictated
    stop=""       the body as it is (llguidance ends it at end-of-generation)

This is the free-text-then-constraint idea of grammar/think.py in general form: `TEXT
"<tool>"` with `[lazy]` (TEXT any text) is exactly think.py's "text up to the first CLOSE".
A body of any regular language is handled by one DFA (grammar/schema/complement.py, as for
`&` and `~`): the shortest matches are the DFA with every edge out of an accepting state
removed, written back as one right-linear rule per state.
"""

from __future__ import annotations

import re
from typing import Callable

from lark import Token

from ministruct.grammar.ir import EMPTY, CharClass, Expr, Grammar, RuleRef, alt, seq, walk
from ministruct.grammar.lark.gaps import NOTHING
from ministruct.grammar.lark.syntax import LarkProblem, Node
from ministruct.grammar.schema.complement import ComplementError, build_dfa, inline_rules, live_states

MARKERS = ("suffix", "stop")
LAZY_ATTRIBUTES = ("lazy", *MARKERS, "stop_capture")
CAPTURE_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_.-]*$")
_NOT_TERMINALS = {"special": "a special token", "json": "%json", "nested": "%lark", "gref": "a grammar reference"}


def check_lazy_attributes(found: dict[str, tuple[Token, Token | None]]) -> None:
    """Refuse what llguidance and XGrammar refuse in `lazy`/`suffix`/`stop`/`stop_capture`
    (`found`: attribute name -> (its key, its value)), at the attribute's position."""
    if "suffix" in found and "stop" in found:
        key = max(found["suffix"][0], found["stop"][0], key=lambda t: t.start_pos or 0)
        raise LarkProblem("`stop` and `suffix` cannot both be given: a lexeme has one end marker", key)
    for name in MARKERS:
        if name not in found:
            continue
        key, value = found[name]
        if value is None:
            raise LarkProblem(f"`{name}` needs a value: a string, a regex or a TERMINAL", key)
        if value.type not in ("STRING", "REGEXP", "TOKEN"):
            raise LarkProblem(
                f"`{name}` must be a string, a regex or an UPPERCASE terminal, not {value.type.lower()} {value}", value
            )
        if name == "suffix" and value.type == "STRING" and str(value) in ('""', "''"):
            raise LarkProblem('`suffix=""` is empty: a suffix must match some text (use `lazy` alone)', value)
    if "stop_capture" in found:
        key, value = found["stop_capture"]
        if not any(m in found for m in MARKERS):
            raise LarkProblem("`stop_capture` needs `stop` or `suffix`: it names what their marker matched", key)
        if value is None or value.type != "STRING":
            raise LarkProblem("`stop_capture` must be a string naming a capture", value or key)
        if not CAPTURE_NAME.match(str(value)[1:-1]):
            raise LarkProblem(f"`stop_capture` name {value} is not a valid capture name", value)
    if "lazy" in found and found["lazy"][1] is not None:
        raise LarkProblem("`lazy` takes no value", found["lazy"][1])


def terminal_body(body: Node, attribute: Token) -> None:
    """Refuse a body that is not terminals (a rule reference, %json, a special token)."""
    stack = [body]
    while stack:
        n = stack.pop()
        if n.kind == "ref" and n.tok.type == "RULE":
            raise LarkProblem(
                f"`{attribute}` applies to a rule whose body is terminals (strings, regexes, TERMINALS), "
                f"and '{n.data}' is a rule",
                n.tok,
            )
        if n.kind in _NOT_TERMINALS:
            raise LarkProblem(f"`{attribute}` applies to a body of terminals, not {_NOT_TERMINALS[n.kind]}", n.tok)
        stack.extend(n.kids)


def shortest_matches(body: Expr, rules: dict[str, Expr], fresh: Callable[[str], str], name: str, at: Token) -> Expr:
    """The texts of `body` (a regular expression; references to `rules` are inlined) none of
    whose proper prefixes is in it, as right-linear rules added to `rules`."""
    try:
        if any(isinstance(x, RuleRef) for x in walk(body)):
            body = inline_rules(Grammar({**rules, "lazy-body": body}, root="lazy-body"))
        dfa = build_dfa([body])
    except ComplementError as e:
        raise LarkProblem(f"`{at}` lexeme too large to compute: {e}", at) from None
    good = {s for s, label in enumerate(dfa.labels) if label}
    live = live_states(dfa, good)
    if 0 not in live:
        return NOTHING
    names = {s: fresh(f"{name}-lazy") for s in sorted(live)}
    for s in sorted(live):
        if s in good:  # the first match: the lexeme ends here
            rules[names[s]] = EMPTY
            continue
        opts = [seq(CharClass(rs), RuleRef(names[t])) for rs, t in dfa.states[s] if t in live]
        rules[names[s]] = alt(*opts) if opts else NOTHING
    return RuleRef(names[0])


__all__ = ["LAZY_ATTRIBUTES", "MARKERS", "check_lazy_attributes", "shortest_matches", "terminal_body"]
