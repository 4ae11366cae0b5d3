"""Peer suites: the regex cases of xgrammar's and outlines' tests, case by case.

ministruct's rule is Python's `re`: a pattern is valid iff `re.compile` accepts
it and a string matches iff `re.fullmatch` does. Where a peer encodes another
dialect (ECMAScript / Rust regex) or its own limits, the case disagrees; each
such case is listed in JUSTIFIED with the reason, and checked to be `re`'s answer.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest

from ministruct.engine.automaton import accepts
from ministruct.errors import GrammarSyntaxError
from ministruct.grammar.regex.parse import parse_regex

SUITES = Path(__file__).resolve().parents[3] / ".." / "shared" / "suites" / "peers"
FILES = ("xgrammar_cases.json", "outlines_cases.json")

JUSTIFIED = {
    "xgrammar_cases::test_grammar_matcher_regex.py::test_regex_refuse": "xgrammar refuses `{,n}`; Python's re reads a{,3} as a{0,3}, and so do we",
    "xgrammar_cases::test_regex_converter.py::test_group_modifiers#7": "xgrammar refuses inline flags; we implement (?i) exactly with re's case folding",
    "xgrammar_cases::test_regex_converter.py::test_escape#2": "\\e is an ECMAScript/PCRE escape; Python's re rejects it (bad escape \\e)",
    "xgrammar_cases::test_regex_converter.py::test_escape#3": "\\u{20BB7} and \\cJ are ECMAScript syntax; Python's re rejects \\u{ (incomplete escape)",
    "xgrammar_cases::test_regex_converter.py::test_group_modifiers#2": "(?<name>...) named groups arrived in Python 3.12; 3.11's re rejects them",
    "outlines_cases::outlines.types.isbn": "uses lookahead (the suite notes it is not a DFA regex); we refuse it with a clear error",
}


def _load() -> list[tuple[str, dict]]:
    cases: list[tuple[str, dict]] = []
    for name in FILES:
        path = SUITES / name
        if not path.exists():
            continue
        for i, case in enumerate(json.loads(path.read_text(encoding="utf-8"))):
            if case.get("kind") != "regex":
                continue
            key = f"{name.removesuffix('.json')}::{case['name']}"
            if any(k == key for k, _ in cases):  # names are unique today; stay stable if not
                key = f"{key}@{i}"
            cases.append((key, case))
    return cases


CASES = _load()


def _outcome(case: dict) -> tuple[bool, str]:
    """(agrees with the peer, what happened)."""
    try:
        g = parse_regex(case["spec"])
    except GrammarSyntaxError as e:
        return case.get("expect") == "build_fails", f"refused: {e}"
    if case.get("expect") == "build_fails":
        return False, "accepted a pattern the peer refuses"
    wrong = [s for s in case["accept"] if not accepts(g, s)] + [s for s in case["reject"] if accepts(g, s)]
    return not wrong, f"disagrees on {wrong!r}"


def test_suites_present() -> None:
    if not CASES:
        pytest.skip(f"peer suites not found under {SUITES}")
    assert len(CASES) > 100


@pytest.mark.parametrize("key,case", CASES, ids=[k for k, _ in CASES])
def test_peer_case(key: str, case: dict) -> None:
    agrees, what = _outcome(case)
    if agrees:
        assert key not in JUSTIFIED, f"{key} agrees now: drop its justification"
        return
    assert key in JUSTIFIED, f"unjustified disagreement with the peer: {what}"
    # every justified disagreement must be Python re's own answer
    try:
        rx = re.compile(case["spec"])
    except re.error:
        assert what.startswith("refused: ") and "invalid regex" in what
        return
    if what.startswith("refused: "):
        assert "invalid regex" not in what  # valid for re: refused as unsupported, by name
        return
    for s in case["accept"] + case["reject"]:
        assert accepts(parse_regex(case["spec"]), s) == (rx.fullmatch(s) is not None), s
