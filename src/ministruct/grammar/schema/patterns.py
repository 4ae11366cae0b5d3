"""`pattern` together with `minLength`/`maxLength`, exact for any pattern the regex front end reads.

The strings a pattern accepts (`re.search` semantics, anchors included) become one DFA over
code points; its product with a character counter (0..maxLength, or 0..minLength when
there is no maximum, the last count standing for "minLength or more") is written as one
grammar rule per live (DFA state, count) pair. Each edge's characters are one shared rule,
JSON-encoded with every escape form (schema_formats.encode_class), up to
MAX_SHARED_ESCAPED_RANGES ranges of non-ASCII characters per edge.
"""

from __future__ import annotations

import re
from typing import Callable, Optional

from ministruct.grammar.ir import EMPTY, CharClass, Expr, Literal, RuleRef, alt, seq
from ministruct.grammar.schema.complement import MAX_DFA_STATES, MAX_DFA_WORK, ComplementError, build_dfa
from ministruct.grammar.schema.formats import encode_class

MAX_PRODUCT_RULES = 20_000
# a format's product (with a pattern or length bounds) is built for formats of small DFAs:
# dates, times, IPv4, UUIDs, durations (at most 124 states, 218 with a pattern); a URI
# (784), an IPv6 address (677), an e-mail or a host name (1,700) make products too large to
# compile quickly (a URI with a pattern: 748 rules, 9,659 automaton states, first mask 0.43 s)
MAX_FORMAT_PRODUCT_STATES = 400
MAX_SHARED_ESCAPED_RANGES = 256  # each edge class is one shared rule: escapes stay affordable


GLOBAL_FLAGS = re.compile(r"(?:\(\?[aiLmsux]+\))*")  # global flags, which must stay in front


def searched_regex(pattern: str) -> str:
    """A regex whose full matches are the strings `pattern` finds a match in (re.search)."""
    flags = GLOBAL_FLAGS.match(pattern).group(0)  # type: ignore[union-attr]  # they must stay in front
    return f"{flags}[\\s\\S]*(?:{pattern[len(flags) :]})[\\s\\S]*"


class PatternTooLarge(ValueError):
    """The DFA x length product would need too many rules."""


def pattern_with_length(
    searched: "Expr | list[Expr]",
    lo: int,
    hi: Optional[int],
    fresh: Callable[[str], str],
    define: Callable[[str, Expr], None],
    accept: Optional[Callable[[frozenset[int]], bool]] = None,
    max_states: Optional[int] = None,
    max_rules: int = MAX_PRODUCT_RULES,
    work: Optional[list[int]] = None,
) -> Optional[Expr]:
    """JSON string content (no quotes) whose decoded text is in `searched` (a full-match
    language) and has `lo` to `hi` characters; None when no string qualifies.

    With several languages, `accept(indices of those that match)` decides (default: any).
    `fresh(hint)` reserves a new rule name, `define(name, body)` sets its body. PatternTooLarge
    when the product would need more than `max_rules` rules, or the DFA has more than
    `max_states` states (found out while the DFA is built: a large one is never finished),
    or its building would take more than `work[0]` steps (what is left is kept there).
    """
    top = hi if hi is not None else lo
    max_rules = min(max_rules, MAX_PRODUCT_RULES)
    cap = max_rules // (top + 1)
    if max_states is not None:
        cap = min(cap, max_states)
    if cap < 1:
        raise PatternTooLarge(f"{top + 1} lengths need more than {max_rules} rules (the limit)")
    try:
        dfa = build_dfa(
            searched if isinstance(searched, list) else [searched],
            max_states=min(cap, MAX_DFA_STATES),
            max_work=MAX_DFA_WORK if work is None else max(work[0], 0),
        )
        if work is not None:
            work[0] -= dfa.work
    except ComplementError as e:
        if "steps" in str(e):
            raise PatternTooLarge(f"{e} (the limit)") from None
        if max_states is not None and cap == max_states:
            raise PatternTooLarge(f"more than {max_states} DFA states (the limit)") from None
        raise PatternTooLarge(f"{e} x {top + 1} lengths: more than {max_rules} rules (the limit)") from None
    n_states = len(dfa.states)
    accepting = [(accept or bool)(label) for label in dfa.labels]

    def after(n: int) -> int:
        return n + 1 if n < top else top  # past `top` only when hi is None: the count saturates

    def may_read(n: int) -> bool:
        return hi is None or n < hi

    # good[n]: states from which an accepted string of allowed length can still be reached
    good: list[set[int]] = [set() for _ in range(top + 1)]
    for n in range(top, -1, -1):
        changed = True
        while changed:  # at a saturated count states lead to the same count: iterate
            changed = False
            for s in range(n_states):
                if s not in good[n] and (
                    (accepting[s] and n >= lo) or (may_read(n) and any(t in good[after(n)] for _, t in dfa.states[s]))
                ):
                    good[n].add(s)
                    changed = True
            changed = changed and after(n) == n
    if 0 not in good[0]:
        return None

    chars: dict[tuple, Expr] = {}

    def encoded(ranges: tuple) -> Expr:
        """The JSON text of one character in `ranges`: a rule of its own unless it is one class
        (raw characters only) or one literal."""
        if ranges not in chars:
            body = encode_class(CharClass(ranges), max_escaped=MAX_SHARED_ESCAPED_RANGES)
            if isinstance(body, (CharClass, Literal)):
                chars[ranges] = body
            else:
                name = fresh("pattern-char")
                define(name, body)
                chars[ranges] = RuleRef(name)
        return chars[ranges]

    names: dict[tuple[int, int], str] = {(0, 0): fresh("pattern")}
    todo = [(0, 0)]
    while todo:
        s, n = todo.pop()
        opts: list[Expr] = [EMPTY] if accepting[s] and n >= lo else []
        if may_read(n):
            m = after(n)
            for ranges, t in dfa.states[s]:
                if t in good[m]:
                    if (t, m) not in names:
                        names[(t, m)] = fresh("pattern")
                        todo.append((t, m))
                    opts.append(seq(encoded(ranges), RuleRef(names[(t, m)])))
        define(names[(s, n)], alt(*opts))
    return RuleRef(names[(0, 0)])
