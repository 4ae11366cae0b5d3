r"""Exactness on the real SmolLM2 vocabulary: regex legal sets equal the `regex` package's partial matching.

Along seeded random walks, at every step token t is legal iff the output so far
followed by t's bytes can still be completed to a full match:
`regex.fullmatch(p, text, partial=True)`; an end-of-generation token iff
`regex.fullmatch(p, text)`. Non-EOG control tokens are never legal.

Tokens are bytes, and 313 SmolLM2 tokens are not valid UTF-8 alone. When output +
token ends inside a UTF-8 sequence, it is legal iff *some* code point completing those
bytes gives a partial match. The code points with a given UTF-8 prefix form one
range [lo, hi]; instead of trying all of them (up to 262,144) the oracle tries
  lo and hi, the first and last code point of the range in each probe class
  (\w \W \d \D \s \S . [^"\\]), and every literal character of the pattern that
  falls in the range.
Every character class in the patterns below is a boolean combination of those probes
and literals, so when any completion matches, one of the tried ones does.
Invalid UTF-8 (a stray continuation byte, an overlong lead) is never legal.

ministruct's regex dialect is Python's `re` (on str); the `regex` package defines `\w`
and `\d` by its own Unicode tables (it counts combining marks as `\w`, `re` counts
`str.isalnum()`: '²' and '½'). So the oracle pattern spells `\w` and `\d` out as the
explicit code point classes `re` itself matches; the rest is the `regex` package's.
"""

from __future__ import annotations

import re
from functools import cache

import numpy as np
import pytest
import regex

from ministruct.engine.compile import compile_grammar
from ministruct.engine.matcher import Matcher

pytestmark = pytest.mark.model

PATTERNS = [
    r"[0-9]{4}",
    r"[a-z]+@[a-z]+\.(com|org)",
    r"(true|false)",
    r"[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])",
    r"\w+ \d{2}",
    r'"([^"\\]|\\.)*"',
]
WALKS, STEPS = 2, 10  # ~0.15 s per oracle step (every token through `regex`)


def re_class(escape: str) -> str:
    """The code points Python's `re` matches with `escape`, as an explicit `regex` class."""
    one = re.compile(escape)
    ranges: list[list[int]] = []
    for c in range(0x110000):
        if not 0xD800 <= c <= 0xDFFF and one.fullmatch(chr(c)):
            if ranges and ranges[-1][1] == c - 1:
                ranges[-1][1] = c
            else:
                ranges.append([c, c])
    return "[" + "".join(f"\\U{a:08x}-\\U{b:08x}" for a, b in ranges) + "]"


RE_CLASSES = {r"\w": re_class(r"\w"), r"\d": re_class(r"\d")}
PROBES = [regex.compile(p) for p in (*RE_CLASSES.values(), r"\s", r"\S", r".", r'[^"\\]')]
PROBES += [regex.compile("[^" + c[1:]) for c in RE_CLASSES.values()]


def oracle_pattern(pattern: str) -> regex.Pattern:
    """`pattern` for the `regex` package, with re's own \\w and \\d (used outside [] only)."""
    for esc, cls in RE_CLASSES.items():
        pattern = pattern.replace(esc, cls)
    return regex.compile(pattern)


@pytest.fixture(scope="module")
def vocab():
    from ministruct.decode.gguf import bundled_model_path
    from ministruct.decode.model import Model

    model = Model.load(bundled_model_path(), vocab_only=True)  # a required dependency: no skip
    yield model.vocabulary
    model.close()


@pytest.fixture(scope="module")
def parse_regex():
    try:
        from ministruct.grammar.regex.parse import parse_regex
    except ImportError as e:
        pytest.fail(f"the regex front end is not importable: {e}")
    return parse_regex


# ------------------------------------------------------------------ the oracle


def prefix_range(tail: bytes) -> tuple[int, int] | None:
    """The code points whose UTF-8 encoding starts with `tail` (an incomplete sequence)."""
    lead = tail[0]
    n = 2 if lead & 0xE0 == 0xC0 else 3 if lead & 0xF0 == 0xE0 else 4 if lead & 0xF8 == 0xF0 else 0
    if not n or len(tail) >= n:
        return None
    found = []
    for filler in (0x80, 0xBF):
        for first_free in range(0x80, 0xC0) if filler == 0x80 else range(0xBF, 0x7F, -1):
            # the first missing byte is the one with constraints (E0, ED, F0, F4); scan it
            data = tail + bytes([first_free]) + bytes([filler] * (n - len(tail) - 1))
            try:
                found.append(ord(data.decode("utf-8")))
                break
            except UnicodeDecodeError:
                continue
    if len(found) != 2:
        return None
    return min(found), max(found)


@cache
def completions(tail: bytes, literals: str) -> tuple[str, ...]:
    """A few code points completing `tail`, one per class the patterns can tell apart."""
    rng = prefix_range(tail)
    if rng is None:
        return ()
    lo, hi = rng
    cands = {lo, hi} | {ord(c) for c in literals if lo <= ord(c) <= hi}
    span = "".join(chr(c) for c in range(lo, hi + 1) if not 0xD800 <= c <= 0xDFFF)
    for probe in PROBES:
        hits = [m.start() for m in probe.finditer(span)]
        if hits:
            cands |= {ord(span[hits[0]]), ord(span[hits[-1]])}
    return tuple(chr(c) for c in sorted(cands))


def partial_ok(pat: regex.Pattern, data: bytes, literals: str) -> bool:
    """Can the text with these bytes still be completed to a full match?"""
    try:
        return pat.fullmatch(data.decode("utf-8"), partial=True) is not None
    except UnicodeDecodeError as e:
        if e.reason != "unexpected end of data":
            return False
        head = data[: e.start].decode("utf-8")
        return any(pat.fullmatch(head + c, partial=True) for c in completions(data[e.start :], literals))


def oracle_legal(pat: regex.Pattern, out: bytes, vocab, literals: str) -> np.ndarray:
    legal = np.zeros(vocab.n_logits, dtype=bool)
    for i, tok in enumerate(vocab.tokens):
        if tok and i not in vocab.control_ids:
            legal[i] = partial_ok(pat, out + tok, literals)
    try:
        done = pat.fullmatch(out.decode("utf-8")) is not None
    except UnicodeDecodeError:
        done = False
    legal[sorted(vocab.eog_ids)] = done
    return legal


# ------------------------------------------------------------------ the oracle's own checks


def test_prefix_range_is_the_set_of_code_points_with_that_prefix():
    assert prefix_range(b"\xc3") == (0xC0, 0xFF)
    assert prefix_range(b"\xe2\x80") == (0x2000, 0x203F)
    assert prefix_range(b"\xe0") == (0x800, 0xFFF)  # E0 80..9F would be overlong
    assert prefix_range(b"\xed") == (0xD000, 0xD7FF)  # ED A0.. would be surrogates
    assert prefix_range(b"\xf4") == (0x100000, 0x10FFFF)
    assert prefix_range(b"\xf5") is None and prefix_range(b"\x80") is None


def test_partial_ok_tries_completions():
    pat = regex.compile(r"é\d")
    assert partial_ok(pat, b"\xc3", "é") and not partial_ok(pat, b"\xc4", "é")
    assert partial_ok(pat, "é".encode() + b"\xd9", "é")  # Arabic-Indic digits start with D9
    assert not partial_ok(pat, b"\xc3\xa9\x80", "é")


# ------------------------------------------------------------------ the walks


@pytest.mark.parametrize("pattern", PATTERNS)
def test_legal_sets_equal_regex_partial_matching(vocab, parse_regex, pattern):
    pat = oracle_pattern(pattern)
    literals = "".join(sorted(set(pattern)))
    compiled = compile_grammar(parse_regex(pattern), vocab, use_cache=False)
    never = np.zeros(vocab.n_logits, dtype=bool)
    never[list(vocab.control_ids - vocab.eog_ids)] = True
    for walk in range(WALKS):
        rng = np.random.default_rng(walk)
        matcher = Matcher(compiled)
        out = b""
        for step in range(STEPS):
            ours = np.asarray(matcher.mask())
            theirs = oracle_legal(pat, out, vocab, literals)
            where = f"{pattern!r}, walk {walk}, step {step}, after {out!r}"
            assert not (ours & never).any(), f"{where}: a control token is legal"
            diff = ours != theirs
            assert not diff.any(), (
                f"{where}: ours only {[vocab.tokens[i] for i in np.flatnonzero(diff & ours)[:8]]}, "
                f"regex only {[vocab.tokens[i] for i in np.flatnonzero(diff & theirs)[:8]]}"
            )
            legal = np.flatnonzero(ours)
            assert legal.size, where
            token = int(legal[rng.integers(legal.size)])
            if token in vocab.eog_ids:
                matcher.reset()
                out = b""
                continue
            matcher.advance(token)
            out += vocab.tokens[token]
