"""llama.cpp's own GBNF material (../shared/suites/llamacpp): parser cases, schema outputs,
reference grammars, and the grammar-integration strings (through the engine)."""

from __future__ import annotations

import json
import random
from pathlib import Path

import pytest
from guards import hang_guard  # tests/ is on sys.path

from grammar.helpers import sample_strings
from ministruct.errors import CompileLimitError, MinistructError
from ministruct.grammar.gbnf.parse import parse_gbnf

SUITES = Path(__file__).resolve().parents[3] / ".." / "shared" / "suites" / "llamacpp"
if not SUITES.is_dir():
    pytest.skip(f"llama.cpp suites not found at {SUITES}", allow_module_level=True)


def _load(name: str) -> list[dict]:
    return json.loads((SUITES / name).read_text(encoding="utf-8"))


PARSER_CASES = _load("parser_cases.json")
SCHEMA_GRAMMARS = [c for c in _load("schema_cases.json") if c.get("expected_grammar")]
GBNF_CASES = [c for c in _load("grammar_cases.json") if c["kind"] == "gbnf"]
GRAMMAR_FILES = sorted((SUITES / "grammars").glob("*.gbnf"))

# notes.md (2026-11-30): ministruct may accept parser_01 if it compiles in bounded time and
# matches exactly the right language, or reject it with a clear error; never hang.
SIZE_REFUSAL = "parser_01_reject"


def _engine():
    import ministruct.engine.automaton as automaton

    return automaton


@pytest.mark.parametrize("case", [c for c in PARSER_CASES if c["name"] != SIZE_REFUSAL], ids=lambda c: c["name"])
def test_parser_cases(case):
    root = case.get("root_symbol", "root")
    if case["expect"] == "parse":
        g = parse_gbnf(case["grammar"], root=root)
        assert g.root == root
        assert parse_gbnf(g.to_gbnf(), root=root) == g
    else:
        with pytest.raises(MinistructError):
            parse_gbnf(case["grammar"], root=root)


def test_parser_case_refused_for_size_by_llama_cpp():
    case = next(c for c in PARSER_CASES if c["name"] == SIZE_REFUSAL)
    try:
        g = parse_gbnf(case["grammar"])
    except MinistructError:
        return  # rejected with a clear error: allowed
    automaton = _engine()
    try:
        with hang_guard(30, "the size-refused grammar"):  # (notes.md: never hang), not a speed claim
            results = [automaton.accepts(g, s) for s in ("", "abc", "a" * 50, "x", "abx")]
    except CompileLimitError:
        results = None  # refused with a clear error: allowed
    if results is not None:  # accepted: the language is exactly [^x]*
        assert results == [True, True, True, False, False]


def test_parser_cases_count():
    assert len(PARSER_CASES) == 27


@pytest.mark.parametrize("case", SCHEMA_GRAMMARS, ids=lambda c: c.get("name", "?"))
def test_schema_expected_grammars_parse(case):
    g = parse_gbnf(case["expected_grammar"])
    assert parse_gbnf(g.to_gbnf()) == g


def test_schema_expected_grammar_count():
    assert len(SCHEMA_GRAMMARS) == 73


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_reference_grammars_parse(path):
    g = parse_gbnf(path.read_text(encoding="utf-8"), source=path.name)
    assert g.warnings == []
    assert parse_gbnf(g.to_gbnf()) == g


def test_reference_grammar_count():
    assert len(GRAMMAR_FILES) == 8


@pytest.mark.parametrize("path", GRAMMAR_FILES, ids=lambda p: p.name)
def test_sampled_strings_are_accepted(path):
    automaton = _engine()
    g = parse_gbnf(path.read_text(encoding="utf-8"))
    rng = random.Random(path.name)
    for s in sample_strings(g, rng, max_depth=10, count=25):
        assert automaton.accepts(g, s), s


@pytest.mark.parametrize("case", [c for c in GBNF_CASES if not c.get("has_token_inputs")], ids=lambda c: c["name"])
def test_integration_strings(case):
    automaton = _engine()
    g = parse_gbnf(case["grammar"])
    for s in case["pass"]:
        assert automaton.accepts(g, s), f"should match: {s!r}"
    for s in case["fail"]:
        assert not automaton.accepts(g, s), f"should not match: {s!r}"


# ---------------------------------------------------------------- token cases

SPECIAL_IDS = (10, 11, 12, 13, 14, 15, 20, 21)


def _token_vocab():
    """Ids 0..21: ordinary tokens with distinctive text (so `!<[11]>` may match 12 and 13, as
    in llama.cpp's test); then one token per printable ASCII byte for the text parts."""
    from ministruct.engine.vocab import Vocabulary

    tokens = [f"<T{i}>".encode() for i in range(22)]
    first_char = len(tokens)
    tokens += [bytes([b]) for b in range(0x20, 0x7F)]
    return Vocabulary.from_bytes(tokens), first_char


def _token_ids(parts, first_char):
    ids = []
    for p in parts:
        if isinstance(p, dict):
            ids.append(p["token"])
        else:
            ids.extend(first_char + ord(ch) - 0x20 for ch in p)
    return ids


def _walk(matcher, ids) -> bool:
    """True when every token is legal in turn and the grammar is complete at the end."""
    for t in ids:
        if not matcher.mask()[t]:
            return False
        matcher.advance(t)
    return matcher.is_accepting()


@pytest.mark.parametrize("case", [c for c in GBNF_CASES if c.get("has_token_inputs")], ids=lambda c: c["name"])
def test_integration_token_cases(case):
    import ministruct.engine.compile as compile_mod
    import ministruct.engine.matcher as matcher_mod

    vocab, first_char = _token_vocab()
    compiled = compile_mod.compile_grammar(parse_gbnf(case["grammar"]), vocab)
    assert case["pass_parts"] and case["fail_parts"]
    for parts in case["pass_parts"]:
        assert _walk(matcher_mod.Matcher(compiled), _token_ids(parts, first_char)), parts
    for parts in case["fail_parts"]:
        assert not _walk(matcher_mod.Matcher(compiled), _token_ids(parts, first_char)), parts


def test_token_cases_use_only_the_expected_ids():
    used = {
        p["token"]
        for c in GBNF_CASES
        if c.get("has_token_inputs")
        for parts in c["pass_parts"] + c["fail_parts"]
        for p in parts
        if isinstance(p, dict)
    }
    assert used <= set(SPECIAL_IDS)
