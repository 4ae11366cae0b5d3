"""Bounded work (issue 15, finding 4 and the deep half of 5): every constraint, however
nested or large, compiles or is refused quickly with a message naming what is too large."""

from __future__ import annotations

import json

import pytest
from guards import hang_guard  # tests/ is on sys.path
from hypothesis import given, settings
from hypothesis import strategies as st

from ministruct.check.grammar import check_text
from ministruct.errors import CompileLimitError, MinistructError, SchemaError
from ministruct.grammar import limits
from ministruct.grammar.constraint import Constraint, load_constraint, load_schema_text
from ministruct.grammar.ir import Grammar, Literal, Repeat, Seq, alt, seq
from ministruct.grammar.limits import (
    MAX_JSON_NESTING,
    bounded,
    estimated_states,
    nesting_error,
    text_nesting_pointer,
)
from ministruct.grammar.regex import parse_regex
from ministruct.grammar.schema import schema_to_grammar

SHAPES = {
    "array": ('{"type":"array","items":', "}", lambda d: "[" * d + "1" + "]" * d),
    "object": ('{"type":"object","properties":{"a":', '},"required":["a"]}', lambda d: '{"a": ' * d + "1" + "}" * d),
    "allOf": ('{"allOf":[', "]}", lambda d: "1"),
    "anyOf": ('{"anyOf":[{"type":"null"},{"type":"array","items":', "}]}", lambda d: "[" * d + "1" + "]" * d),
}


def nested(shape: str, depth: int) -> str:
    pre, post, _ = SHAPES[shape]
    return pre * depth + '{"type":"integer"}' + post * depth


@pytest.mark.parametrize("shape", list(SHAPES))
@pytest.mark.parametrize("depth", [10, 16, 25, 40, 63, 64, 100, 300, 900, 1000])
def test_nested_schemas_compile_or_are_refused_naming_the_pointer(tmp_path, shape, depth):
    path = tmp_path / "s.json"
    path.write_text(nested(shape, depth))
    with hang_guard(30, f"{shape} nested {depth} deep"):
        try:
            c = load_constraint(schema=str(path))
        except SchemaError as e:
            refused = e
        else:
            refused = None
            assert check_text(c.grammar, SHAPES[shape][2](depth)).accepted
    json_levels = {"array": 1, "object": 2, "allOf": 2, "anyOf": 3}[shape] * depth
    if json_levels < MAX_JSON_NESTING:
        assert refused is None
    else:
        msg = str(refused)
        assert msg.startswith(f"{path}: at /") and f"nests deeper than {MAX_JSON_NESTING} levels" in msg, msg
        assert "RecursionError" not in msg and len(msg) < 400


def test_nested_arrays_grow_linearly():
    # finding 4: depth 16 took 11 s and 362 MB, depth 25 over a minute (the item is used twice per level)
    def size(d):
        return estimated_states(schema_to_grammar(json.loads(nested("array", d))).rules)

    s20, s40, s80 = size(20), size(40), size(80)
    assert s80 - s40 == pytest.approx(2 * (s40 - s20), rel=0.2)  # 2^depth before: each level doubled it


def test_schema_text_too_deep_for_the_json_reader_names_file_and_pointer():
    text = '{"properties": {"a": ' * 2000 + "{}" + "}}" * 2000
    with pytest.raises(SchemaError) as e:
        load_schema_text(text, "deep.json")
    msg = str(e.value)
    assert msg.startswith("deep.json: at /properties/a/properties/a/") and "nests deeper than" in msg


def test_bad_json_schema_names_its_file(tmp_path):
    # finding 6: "not valid JSON" without the file name
    p = tmp_path / "bad.json"
    p.write_text('{"type": "string",}')
    with pytest.raises(SchemaError, match=rf"^{p}: not valid JSON: .*line 1, column 19"):
        load_constraint(schema=str(p))


def test_nesting_helpers_agree():
    value = {"a": [{"b": {"c": [1]}}]}
    assert nesting_error(value, limit=10) is None
    assert nesting_error(value, limit=3) == "/a/0/b"
    assert text_nesting_pointer(json.dumps(value), limit=3) == "/a/0/b"
    assert text_nesting_pointer('{"x/y": {"~": [0, [1, [2]]]}}', limit=3) == "/x~1y/~0/1"


@pytest.mark.parametrize(
    "kind, value, needles",
    [
        ("regex", "a{1000000}", ("<regex>", '"a"{1000000}', "1,000,000", "100,000")),
        ("regex", "(ab){0,2000000}", ("<regex>", "2,000,000")),
    ],
)
def test_huge_repeat_counts_refused_before_any_work(kind, value, needles):
    # finding 4: a{1000000} took 7-11 s and 0.9 GB
    with hang_guard(10, value):
        with pytest.raises(CompileLimitError) as e:
            load_constraint(**{kind: value})
    for n in needles:
        assert n in str(e.value), str(e.value)


def _huge_bound_schema(tmp_path, keyword: str):
    """A schema file whose property x has `keyword` 100,000,000 (on a string or an array)."""
    typ = "string" if "Length" in keyword else "array"
    p = tmp_path / "s.json"
    p.write_text(json.dumps({"type": "object", "properties": {"x": {"type": typ, keyword: 100_000_000}}}))
    return p


@pytest.mark.parametrize("keyword", ["minLength", "minItems"])
def test_huge_lengths_refused_at_their_pointer_or_ignored_when_lenient(tmp_path, keyword):
    # finding 4: maxLength 1e8 took 7.7 s and 946 MB before it was refused
    p = _huge_bound_schema(tmp_path, keyword)
    with hang_guard(10, keyword):
        with pytest.raises(SchemaError) as e:
            load_constraint(schema=str(p))
        assert str(e.value).startswith(f"{p}: at /properties/x/{keyword}: keyword '{keyword}' (100,000,000)")
        assert "lenient=True" in str(e.value)
        c = load_constraint(schema=str(p), lenient=True)
    assert any(keyword in w for w in c.warnings)


@pytest.mark.parametrize("keyword", ["maxLength", "maxItems"])
def test_huge_maxima_are_the_compile_limit_at_once_and_say_so(tmp_path, keyword):
    # a maximum no output of a model's context comes near: the limit, a restriction said in a warning
    p = _huge_bound_schema(tmp_path, keyword)
    with hang_guard(10, keyword):
        c = load_constraint(schema=str(p))
    assert any(f"/properties/x/{keyword}" in w and "a restriction" in w for w in c.warnings), c.warnings
    assert check_text(c.grammar, '{"x": "abc"}' if "Length" in keyword else '{"x": []}').accepted


def test_lenient_is_named_as_parameter_and_flag():
    # finding 6: "use lenient" where the flag is --lenient
    from ministruct.cli.errors import error_text

    with pytest.raises(SchemaError, match=r"\(lenient=True ignores it\)$") as e:
        schema_to_grammar({"type": "array", "uniqueItems": True})
    assert error_text(e.value).endswith("are not a context-free language) (--lenient ignores it)")
    with pytest.raises(SchemaError) as e:
        schema_to_grammar({"oneOf": [{"type": "string", "format": "email"}, {"type": "string", "minLength": 1}]})
    assert "(--oneof-as-anyof accepts any branch)" in error_text(e.value)


def test_a_grammar_too_large_is_refused_naming_its_largest_rule():
    pattern = "|".join(f"{c}{{99999}}" for c in "abcdefghijkl")  # each count allowed, together too large
    with hang_guard(10, "a too large grammar"):
        with pytest.raises(
            CompileLimitError, match=r"^<regex>: grammar too large to compile \(about 2,4.* largest rule is 'root'"
        ):
            load_constraint(regex=pattern)


def test_deep_expressions_are_cut_into_rules():
    e = Literal("x")
    for i in range(500):
        e = seq(Literal("("), alt(e, Literal(str(i))), Literal(")"))
    from ministruct.grammar.ir import Grammar

    g = bounded(Grammar({"root": e}))
    assert len(g.rules) > 5
    text = "(" * 500 + "x" + ")" * 500
    assert check_text(g, text).accepted and not check_text(g, text[:-1]).accepted


def test_hashing_a_shared_dag_is_linear():
    e = Literal("x")
    for _ in range(200):  # 2^200 paths; each node hashed once
        e = Seq((e, Repeat(e, 0, None)))
    f = Literal("x")
    for _ in range(200):
        f = Seq((f, Repeat(f, 0, None)))
    with hang_guard(10, "hashing"):
        assert hash(e) == hash(f) and len({e: 1, f: 2}) == 1 and alt(e, f) is e


regex_text = st.text(alphabet="ab()|*+?{}[]^-,.0123456789\\", max_size=24)


@settings(max_examples=150, deadline=None)
@given(regex_text, st.lists(st.text(alphabet="ab0123", max_size=8), max_size=6))
def test_reshaping_keeps_the_language(pattern, samples):
    try:
        g = parse_regex(pattern, source="<regex>")
    except MinistructError:
        return
    old = (limits.MAX_HEIGHT, limits.SHARE_WHEN_TOTAL, limits.SHARE_MIN_STATES)
    limits.MAX_HEIGHT, limits.SHARE_WHEN_TOTAL, limits.SHARE_MIN_STATES = 2, 0, 1
    try:
        from ministruct.grammar.ir import Grammar

        rules, size = limits.reshape_sized(g.rules, limits.fresh_namer(g.rules))
        shaped = Grammar(rules, root=g.root)
    finally:
        limits.MAX_HEIGHT, limits.SHARE_WHEN_TOTAL, limits.SHARE_MIN_STATES = old
    assert size.states == estimated_states(shaped.rules)  # what bounded() then checks, without counting again
    for s in samples:
        assert _verdict(shaped, s) == _verdict(g, s), (pattern, s)


def _verdict(g, text: str):
    try:
        return check_text(g, text).accepted
    except MinistructError as e:  # e.g. an empty language: refused the same way before and after
        return type(e).__name__


def test_a_schema_grammar_is_reshaped_once(monkeypatch):
    """schema_to_grammar reshapes its rules; Constraint's bounded() then only checks them,
    unless the rules changed since (another body, another rule)."""
    calls = []
    real = limits.reshape_sized

    def counting(rules, fresh):
        calls.append(len(rules))
        return real(rules, fresh)

    monkeypatch.setattr(limits, "reshape_sized", counting)
    schema = {"type": "object", "properties": {"a": {"type": "array", "items": {"type": "string"}}}}
    g = schema_to_grammar(schema)
    assert bounded(g) is g and calls == []
    assert Constraint.from_json_schema(schema).grammar.to_gbnf() == g.to_gbnf()
    g.rules["extra"] = Literal("x")  # changed since: reshaped again
    bounded(g)
    assert len(calls) == 1
    fresh = schema_to_grammar(schema)
    copy = Grammar(dict(fresh.rules), fresh.root)  # another dict, never marked: reshaped, to the same
    assert bounded(copy).to_gbnf() == fresh.to_gbnf()
    assert len(calls) == 2


def test_a_marked_grammar_is_still_checked():
    rules = {"root": Repeat(Literal("a"), 0, limits.MAX_REPEAT + 1)}
    limits.mark_reshaped(rules)
    with pytest.raises(CompileLimitError):
        bounded(Grammar(rules))
