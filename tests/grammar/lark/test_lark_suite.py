"""The peers' Lark cases (../shared/suites/peers/lark_cases.json, llguidance's and
XGrammar's tests), read with greedy lexemes (the default, llguidance's reading): every case
agrees with the peer, or DIFFERS below names why, and the test checks that it differs in
exactly that way. Acceptance goes through the engine's
byte automaton (check_text); %json schemas use flexible whitespace, llguidance's default."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from grammar.helpers import shared_suites
from ministruct.check.grammar import check_text
from ministruct.errors import GrammarSyntaxError, MinistructError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.schema import SchemaOptions

SUITE = shared_suites() / "peers" / "lark_cases.json"
if not SUITE.is_file():
    pytest.skip(f"Lark suite not found at {SUITE}", allow_module_level=True)
CASES = json.loads(SUITE.read_text(encoding="utf-8"))

LAZY_NULLABLE = (
    "XGrammar's lazy lexeme that may be empty matches only the empty string; llguidance's (and ministruct's "
    "greedy reading) is an optional lexeme that ends at its first non-empty match (`<a>` for /[a-z]*/)"
)
TAG_DISPATCH = (
    "XGrammar's tag dispatch: an any-text body with a suffix may end the output without it; a lazy lexeme "
    "(llguidance, ministruct) needs its suffix"
)
PARAMETRIC = "refused: parametric rules (`name::_`, `%if`)"
TOKEN_SETS = "refused: token sets a token atom cannot express (<[*]>, <[^a,b]>)"
SCHEMA_PATTERN = "our JSON Schema front end: \\d \\w \\s and \\u escapes in keys read differently from llguidance"
PEER_SCHEMA_LIMIT = "peer's own limit: llguidance refuses this schema, our schema front end enforces it"
XG_LIMIT = "peer's own limit: XGrammar refuses what llguidance's dialect allows"
PY_FLAGS = "Python `re` flags: case folding is Unicode (XGrammar folds ASCII only)"
TRAILING = "XGrammar allows a gap after the last lexeme; llguidance does not (checked in test_lark_llguidance)"
LOOKAROUND = "refused: a lookahead cannot be enforced by a mask (XGrammar ignores it)"

DIFFERS = {
    "xgrammar::test_lark_ignore_is_inserted_between_and_after_lexemes": TRAILING,
    "xgrammar::test_lark_default_disallows_initial_skip_but_allows_trailing_skip": TRAILING,
    "xgrammar::test_lark_nested_lark_supports_recursion_json_and_ignore": TRAILING,
    "llguidance::test_lark_syntax_general#32": TOKEN_SETS,
    "llguidance::test_lark_syntax_general#35": TOKEN_SETS,
    "llguidance::test_lark_syntax_general#36": TOKEN_SETS,
    "llguidance::test_json_dw_pattern#1": SCHEMA_PATTERN,
    "llguidance::test_json_dw_pattern#2": SCHEMA_PATTERN,
    "llguidance::test_json_dw_pattern#3": SCHEMA_PATTERN,
    "llguidance::test_json_additional_property_keys_validate_unicode_scalars": SCHEMA_PATTERN,
    "llguidance::test_json_pattern_properties#2": PEER_SCHEMA_LIMIT,
    "llguidance::test_json_min_max_properties#1": PEER_SCHEMA_LIMIT,
    "llguidance::test_json_min_max_properties#2": PEER_SCHEMA_LIMIT,
    "llguidance::test_lark_syntax_perc#4": PEER_SCHEMA_LIMIT,  # `if` (its limit; `if` alone constrains nothing)
    "xgrammar::test_lark_core_languages[regex-case-insensitive-folds-ascii-only]": PY_FLAGS,
    "xgrammar::test_lark_core_languages[regex-case-insensitive-non-ascii-range-not-folded]": PY_FLAGS,
    "xgrammar::test_lark_core_languages[regex-lookahead-ignored]": LOOKAROUND,
    "xgrammar::test_lark_errors_are_explicit_and_located[non-ascii-string-flag]": XG_LIMIT,
    "xgrammar::test_lark_errors_are_explicit_and_located[unsupported-regex-flag]": XG_LIMIT,
    "xgrammar::test_lark_errors_are_explicit_and_located[no-forcing-option]": XG_LIMIT,
    "xgrammar::test_lark_lazy_non_terminal_like_bodies_are_rejected#3": XG_LIMIT,
    "xgrammar::test_lark_lazy_non_terminal_like_bodies_are_rejected#4": XG_LIMIT,
    "xgrammar::test_lark_lazy_nullable_always_matches_empty#1": LAZY_NULLABLE,
    "xgrammar::test_lark_suffix_stop_any_text_tag_dispatch_capture[suffix]#1": TAG_DISPATCH,
    "xgrammar::test_lark_suffix_stop_any_text_tag_dispatch_capture[stop]#1": TAG_DISPATCH,
    "xgrammar::test_lark_suffix_stop_any_text_tag_dispatch_stop_capture[suffix]#1": TAG_DISPATCH,
    "xgrammar::test_lark_suffix_stop_any_text_tag_dispatch_stop_capture[stop]#1": TAG_DISPATCH,
}


def reason(case: dict) -> str | None:
    """Why ministruct's verdict on this case differs from the peer's (None: it agrees)."""
    if case["name"] in DIFFERS:
        return DIFFERS[case["name"]]
    if case["expect"] != "error" and "parametric" in case["features"]:
        return PARAMETRIC
    return None


def _load(case: dict) -> Constraint:
    return Constraint.from_lark(case["grammar"], SchemaOptions(whitespace="flexible"), source=case["name"])


def _verdicts(case: dict) -> list[str]:
    """The strings on which the engine disagrees with the case."""
    c = _load(case)
    wrong = [f"accept {s!r}" for s in case["accept"] if not check_text(c.grammar, s).accepted]
    wrong += [f"reject {s!r}" for s in case["reject"] if check_text(c.grammar, s).accepted]
    if case.get("check") == "prefix":  # refused before its end, unless it can still be completed
        open_ended = set(case.get("reject_incomplete", ())) | {
            s for s in case["reject"] if any(a.startswith(s) for a in case["accept"])
        }  # (one upstream case leaves the prefix "A" of "AB" out of reject_incomplete)
        wrong += [
            f"refuse early {s!r}"
            for s in case["reject"]
            if (s in open_ended) != check_text(c.grammar, s, prefix=True).accepted
        ]
    return wrong


@pytest.mark.parametrize("case", [c for c in CASES if reason(c) is None], ids=lambda c: c["name"])
def test_agrees(case):
    if case["expect"] == "error":
        with pytest.raises(MinistructError) as info:
            _load(case)
        if isinstance(info.value, GrammarSyntaxError):  # located: line and column, caret excerpt
            assert info.value.line is not None and info.value.column is not None
            assert "^" in info.value.excerpt()
        return
    if case["expect"] == "compiles":
        _load(case)
        return
    assert _verdicts(case) == []


@pytest.mark.parametrize("case", [c for c in CASES if reason(c) is not None], ids=lambda c: c["name"])
def test_differs_for_the_named_reason(case):
    why = reason(case)
    if why.startswith("refused"):
        with pytest.raises(GrammarSyntaxError) as info:
            _load(case)
        assert info.value.line is not None and "^" in info.value.excerpt()
        return
    if case["expect"] == "error":  # the peer refuses it; we compile it
        _load(case)
        return
    assert _verdicts(case) != []  # a language difference: some string is judged otherwise


def test_counts_by_reason():
    counts = Counter(reason(c) or "agrees" for c in CASES)
    print("\n".join(f"{n:4d}  {r}" for r, n in counts.most_common()))
    assert sum(counts.values()) == 250
    assert counts["agrees"] == 217
