"""Differential tests: random regexes and near-miss strings, ministruct vs re / regex.

Full match: accepts(parse_regex(p), s) == re.fullmatch(p, s).
Prefix:     accepts_prefix(parse_regex(p), s) == regex.fullmatch(p, s, partial=True).
Round trip: re.fullmatch(grammar_to_regex(parse_regex(p)), s) == re.fullmatch(p, s).
"""

from __future__ import annotations

import re
import re._parser as sre

import regex
from hypothesis import HealthCheck, assume, given, settings
from hypothesis import strategies as st

from ministruct.engine.automaton import accepts, accepts_prefix
from ministruct.grammar.regex.parse import grammar_to_regex, parse_regex

LEAVES = st.one_of(
    st.sampled_from(list("abc")),
    st.sampled_from(["\\.", "\\n", "-", "\\d", "\\w", "\\s", "\\D", "\\W", ".", "\\x41", "é"]),
    st.sampled_from(["[ab]", "[^a]", "[a-c]", "[a-]", "[]b]", "[\\d_]", "[^\\w\\n]", "[.a-b]"]),
)
ANCHORS = st.sampled_from(["^", "$", "\\A", "\\Z"])


BOUNDED = st.one_of(
    st.just("?"),
    st.tuples(st.integers(0, 3), st.integers(0, 2)).map(lambda t: f"{{{t[0]},{t[0] + t[1]}}}"),
    st.integers(0, 3).map(lambda m: f"{{{m}}}"),
    st.integers(1, 3).map(lambda n: f"{{,{n}}}"),
)
UNBOUNDED = st.one_of(st.sampled_from(["*", "+"]), st.integers(0, 2).map(lambda m: f"{{{m},}}"))


def _unbounded(p: str) -> bool:
    return "*" in p or "+" in p or ",}" in p


def _quantified(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    """x{m,n} and friends; no unbounded repeat of an unbounded repeat, on which
    re's backtracking (our oracle) takes exponential time."""
    lazy = st.sampled_from(["", "", "?"])
    return inner.flatmap(
        lambda x: st.tuples(BOUNDED if _unbounded(x) else st.one_of(BOUNDED, UNBOUNDED), lazy).map(
            lambda t: f"(?:{x}){t[0]}{t[1]}"
        )
    )


def _combine(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
    return st.one_of(
        st.lists(inner, min_size=2, max_size=3).map("".join),
        st.lists(inner, min_size=2, max_size=3).map(lambda xs: "(?:" + "|".join(xs) + ")"),
        inner.map(lambda x: f"({x})"),
        _quantified(inner),
    )


def _repeat_depth(items) -> int:
    """How deeply repeats nest in a parsed pattern (re._parser's tree)."""
    depth = 0
    for op, av in items:
        if op in (sre.MAX_REPEAT, sre.MIN_REPEAT):
            depth = max(depth, 1 + _repeat_depth(av[2]))
        elif op is sre.SUBPATTERN:
            depth = max(depth, _repeat_depth(av[3]))
        elif op is sre.BRANCH:
            depth = max(depth, *[_repeat_depth(b) for b in av[1]])
    return depth


def _tame(p: str) -> bool:
    """Three nested repeats can send re's backtracking (the oracle) into minutes."""
    return _repeat_depth(sre.parse(p)) <= 2


PATTERNS = st.one_of(
    st.recursive(LEAVES, _combine, max_leaves=8),
    st.recursive(LEAVES, _combine, max_leaves=6).map(lambda x: f"(?P<top>{x})x?"),
).filter(_tame)
PATTERNS_WITH_ANCHORS = st.recursive(st.one_of(LEAVES, LEAVES, ANCHORS), _combine, max_leaves=8)


def _mutate(s: str, data: st.DataObject) -> str:
    if not s or data.draw(st.booleans()):
        i = data.draw(st.integers(0, len(s)))
        return s[:i] + data.draw(st.sampled_from(list("ab-\n1é "))) + s[i:]
    i = data.draw(st.integers(0, len(s) - 1))
    if data.draw(st.booleans()):
        return s[:i] + s[i + 1 :]
    return s[:i] + data.draw(st.sampled_from(list("abc\n1_ "))) + s[i + 1 :]


def _texts(pattern: str, data: st.DataObject) -> list[str]:
    """Strings near the language: matches (when any exist), their prefixes, and mutations."""
    out = [""]
    try:
        m = data.draw(st.from_regex(re.compile(pattern), fullmatch=True))
    except Exception:  # an empty language has nothing to draw
        m = None
    if m is not None:  # short strings keep re's backtracking quick
        m = m[:12]
        out += [m, m[: len(m) // 2], _mutate(m, data), _mutate(_mutate(m, data), data)]
    out.append(data.draw(st.text(alphabet="abc1-\n. é", max_size=6)))
    return [s for s in out if not any(0xD800 <= ord(c) <= 0xDFFF for c in s)]


def _same_classes(c: str) -> bool:
    return all((re.fullmatch(k, c) is None) == (regex.fullmatch(k, c) is None) for k in ("\\w", "\\s", "\\d"))


_LAZY = re.compile(r"(\)(?:\?|\*|\+|\{\d*,?\d*\}))\?")


def _greedy(pattern: str) -> str:
    """The same language with lazy quantifiers made greedy. The `regex` package's partial
    matching is wrong on some lazy quantifiers: regex.fullmatch('(?:(?:b)+?){2}', 'bba',
    partial=True) reports a partial match that nothing can complete (the greedy form
    correctly does not). Every quantifier here is written `(?:x)Q`, so `)Q?` is lazy."""
    return _LAZY.sub(r"\1", pattern)


def _check(pattern: str, data: st.DataObject, exact_prefix_oracle: bool = True) -> None:
    g = parse_regex(pattern)
    printed = re.compile(grammar_to_regex(g))
    for s in _texts(pattern, data):
        want = re.fullmatch(pattern, s) is not None
        assert accepts(g, s) == want, (pattern, s, g.to_gbnf())
        assert (printed.fullmatch(s) is not None) == want, (pattern, s, printed.pattern)
        # the `regex` package is the prefix oracle; skip strings holding a code point
        # on which its \w, \s or \d differ from re's (e.g. combining marks are \w there)
        if all(_same_classes(c) for c in s):
            want_prefix = regex.fullmatch(_greedy(pattern), s, partial=True) is not None
            got_prefix = accepts_prefix(g, s)
            if exact_prefix_oracle:
                assert got_prefix == want_prefix, (pattern, s, g.to_gbnf())
            else:  # regex over-approximates: a$b is "partial" on "a", yet nothing completes it
                assert not got_prefix or want_prefix, (pattern, s, g.to_gbnf())
                assert got_prefix or not want, (pattern, s, g.to_gbnf())


SETTINGS = settings(
    max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]
)


@SETTINGS
@given(PATTERNS, st.data())
def test_random_regexes_agree_with_re_and_regex(pattern: str, data: st.DataObject) -> None:
    _check(pattern, data)


@SETTINGS
@given(PATTERNS_WITH_ANCHORS, st.data())
def test_random_regexes_with_anchors_anywhere(pattern: str, data: st.DataObject) -> None:
    try:
        re.compile(pattern)
    except re.error:  # e.g. a quantifier right after an anchor
        assume(False)
    assume(_tame(pattern))
    _check(pattern, data, exact_prefix_oracle=False)


@settings(max_examples=100, deadline=None)
@given(PATTERNS, st.sampled_from(["(?i)", "(?s)", "(?x)", "(?a)", "(?is)"]), st.data())
def test_random_regexes_under_flags(pattern: str, flags: str, data: st.DataObject) -> None:
    _check(flags + pattern, data)
