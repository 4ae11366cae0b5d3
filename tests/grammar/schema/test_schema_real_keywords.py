"""The keywords real schemas use that used to be refused: non-integer `multipleOf` (and
its negation), `pattern` or `format` with length bounds past an exact product (a part of
the language that fits), `format: regex`, a maxLength past the repetition limit.

Oracles: the `jsonschema` validator with the standard's `multipleOf` (schema/multiples.py
says where the package's float division differs), exact decimal arithmetic on the text,
Python's `re` and, where node is installed, JavaScript's own `RegExp` (ECMA-262).
"""

from __future__ import annotations

import json
import random
import re
import shutil
import subprocess
import warnings
from decimal import Decimal

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jsonschema import Draft202012Validator

from grammar.helpers import sample_strings
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.limits import MAX_REPEAT
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.multiples import exact_validator

EXACT = exact_validator(Draft202012Validator)
STEPS = [0.01, 0.1, 0.25, 2.5, 0.5, 0.05, 1.5, 0.001, 3, 7]


def _valid(schema, value) -> bool:
    return EXACT(schema, format_checker=Draft202012Validator.FORMAT_CHECKER).is_valid(value)


@st.composite
def _number_texts(draw):
    whole = draw(st.sampled_from(["0", "1", "2", "7", "10", "25", "99", "100", "1234", "98765"]))
    if draw(st.booleans()):
        whole += "." + draw(st.text(st.sampled_from("0123456789"), min_size=1, max_size=5))
    return ("-" if draw(st.booleans()) else "") + whole


@st.composite
def _number_schemas(draw):
    schema: dict = {"type": draw(st.sampled_from(["number", "integer"]))}
    step = draw(st.sampled_from(STEPS))
    if draw(st.booleans()):
        schema["multipleOf"] = step
    else:
        schema["not"] = {"multipleOf": step}
    for k in ("minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"):
        if draw(st.integers(0, 3)) == 0:
            schema[k] = draw(st.sampled_from([-10, -2.5, 0, 0.3, 1, 7.25, 50, 1000]))
    return schema


@settings(max_examples=60)
@given(_number_schemas(), st.lists(_number_texts(), min_size=5, max_size=25), st.integers(0, 2**16))
def test_multiples_accept_only_valid_numbers_and_generate_valid_ones(schema, texts, seed):
    try:
        g = schema_to_grammar(schema, whitespace="compact")
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        return
    for t in texts:
        value = json.loads(t)
        if accepts(g, t):
            assert _valid(schema, value), (schema, t)
            step = schema.get("multipleOf", schema.get("not", {}).get("multipleOf"))
            exact = (Decimal(t) / Decimal(repr(step))) % 1 == 0  # the text's own digits
            assert exact == ("multipleOf" in schema), (schema, t)
    for t in sample_strings(g, random.Random(seed), count=10):
        assert _valid(schema, json.loads(t)), (schema, t)


def test_decimal_multiples_are_the_standards_not_the_float_divisions():
    """0.07 is a multiple of 0.01 (7 times): JSON Schema says so; the `jsonschema` package
    divides floats (0.07 / 0.01 = 7.000000000000001) and says no. The grammar takes the
    standard's side, and so does `check` (InstanceChecker)."""
    from ministruct.check.instance import InstanceChecker

    schema = {"type": "number", "multipleOf": 0.01, "minimum": 0, "maximum": 1}
    g = schema_to_grammar(schema, whitespace="compact")
    assert accepts(g, "0.07") and accepts(g, "0.1") and accepts(g, "1") and accepts(g, "0.50")
    assert not accepts(g, "0.071") and not accepts(g, "1.01") and not accepts(g, "-0.01")
    assert not Draft202012Validator(schema).is_valid(0.07)  # the package's float division
    assert EXACT(schema).is_valid(0.07) and InstanceChecker(schema).check("0.07").accepted
    assert not InstanceChecker(schema).check("0.075").accepted


def test_multiples_of_decimal_steps_merge_by_their_least_common_multiple():
    g = schema_to_grammar(
        {"allOf": [{"multipleOf": 0.1}, {"multipleOf": 0.25}], "type": "number"}, whitespace="compact"
    )
    assert accepts(g, "0.5") and accepts(g, "1.5") and accepts(g, "-2")
    assert not accepts(g, "0.25") and not accepts(g, "0.1") and not accepts(g, "0.75")


def test_generated_multiples_keep_to_fifteen_significant_digits():
    # so that the float a validator reads is the number the digits say
    g = schema_to_grammar({"type": "number", "multipleOf": 0.5}, whitespace="compact")
    assert accepts(g, "123456789.5") and not accepts(g, "12345678901234.5")


def test_a_multiple_machine_past_its_limit_is_refused_by_pointer():
    schema = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.9973, "minimum": 3.3}}}
    with pytest.raises(
        SchemaError, match=r"at /properties/x/multipleOf: .*more than 20000 states before minimizing \(the limit\)"
    ):
        schema_to_grammar(schema)


INT_STEPS = [2, 3, 4, 5, 6, 7, 9, 10, 11, 12, 14, 15, 20, 21, 35, 60, 77, 420, 0.5, 2.5]


@st.composite
def _several_steps(draw):
    """Integers (or numbers) that are multiples of some steps and of none of others, in bounds:
    the shapes (allOf of multipleOf, not of multipleOf, anyOf of both) whose machines are
    large before they are made one step and minimized."""
    kind = draw(st.sampled_from(["integer", "number"]))
    parts: list = [{"multipleOf": m} for m in draw(st.lists(st.sampled_from(INT_STEPS), max_size=3))]
    parts += [{"not": {"multipleOf": m}} for m in draw(st.lists(st.sampled_from(INT_STEPS), max_size=3))]
    if draw(st.booleans()):
        parts.append(
            {
                "not": {
                    "allOf": [
                        {"multipleOf": m} for m in draw(st.lists(st.sampled_from(INT_STEPS), min_size=1, max_size=3))
                    ]
                }
            }
        )
    lo = draw(st.integers(-5000, 5000))
    return {"type": kind, "allOf": parts or [{}], "minimum": lo, "maximum": lo + draw(st.integers(0, 3000))}


@settings(max_examples=60)
@given(_several_steps(), st.integers(0, 2**16))
def test_several_steps_accept_exactly_the_valid_integers_and_generate_valid_numbers(schema, seed):
    """Both ways on every integer in the bounds (brute force), and samples valid."""
    try:
        g = schema_to_grammar(schema, whitespace="compact")
    except SchemaError as e:
        if e.keyword == "multipleOf" and "(the limit)" in str(e):
            return  # (bounded work: a machine past its limit is refused by pointer, naming it)
        assert "accepts no value" in str(e), e
        assert not any(_valid(schema, x) for x in range(schema["minimum"], schema["maximum"] + 1)), schema
        return
    for x in range(schema["minimum"], schema["maximum"] + 1, 7):
        assert accepts(g, str(x)) == _valid(schema, x), (schema, x)
    for t in sample_strings(g, random.Random(seed), count=10):
        assert _valid(schema, json.loads(t)), (schema, t)


def test_steps_whose_machine_minimizes_small_compile():
    """Multiples of 420 (4, 3, 5, 7 together) that are not multiples of 9 from 10,000 up: 12,559
    combinations of bound state and remainders, 89 rules once states no digits tell apart are one."""
    schema = {
        "type": "integer",
        "allOf": [{"multipleOf": 5}, {"multipleOf": 3}, {"multipleOf": 7}, {"multipleOf": 4}],
        "not": {"multipleOf": 9},
        "minimum": 10000,
    }
    g = schema_to_grammar(schema, whitespace="compact")
    assert sum(n.startswith("multiple") for n in g.rules) < 200
    for x in range(9000, 40000, 60):
        assert accepts(g, str(x)) == _valid(schema, x), x
    assert not accepts(g, "10080") and accepts(g, "10500") and not accepts(g, "10920.5")


# ------------------------------------------------------------ lengths past a product


def _check_samples(schema, n=40, seed=0):
    g = schema_to_grammar(schema, whitespace="compact")
    rng = random.Random(seed)
    for t in sample_strings(g, rng, count=n):
        value = json.loads(t)
        assert _valid(schema, value), (schema, t)
    return g


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "format": "email", "maxLength": 64},
        {"type": "string", "format": "email", "maxLength": 254, "minLength": 6},
        {"type": "string", "format": "uri", "maxLength": 2048},
        {"type": "string", "format": "uri-reference", "maxLength": 100},
        {"type": "string", "format": "hostname", "maxLength": 63},
        {"type": "string", "pattern": "^(?:\\S+\\s+){0,19}\\S+$", "maxLength": 200},
        {"type": "string", "pattern": "^[A-Za-z0-9+/]*={0,2}$", "minLength": 4, "maxLength": 32768},
        {"type": "string", "pattern": "[a-z]", "minLength": 50, "maxLength": 500},
        {"type": "string", "format": "uri", "pattern": "^https://"},
        {"type": "string", "format": "email", "pattern": "^\\w+([.-]?\\w+)*@\\w+([.-]?\\w+)*(\\.\\w{2,})+$"},
    ],
    ids=lambda s: json.dumps(s)[:60],
)
def test_a_product_past_its_limit_is_a_part_of_the_language_that_fits(schema):
    g = _check_samples(schema)
    typical = {
        "email": "jane.doe@example.com",
        "uri": "https://example.com/a/b?x=1",
        "uri-reference": "/a/b?x=1",
        "hostname": "api.example.com",
    }.get(schema.get("format", ""))
    if typical is not None and "pattern" not in schema:
        assert accepts(g, json.dumps(typical))
    if schema.get("pattern") == "[a-z]":  # (its product fits: exact, nothing to say)
        assert not g.warnings and accepts(g, json.dumps("1" * 49 + "a"))
    else:
        assert any("a restriction" in w for w in g.warnings), g.warnings  # said, not silent


@settings(max_examples=40)
@given(
    st.sampled_from(["^[a-z]+(-[a-z]+)*$", "[0-9]", "^a.*b$", "x|yz", "^(ab|c)+$", "\\d{3}"]),
    st.integers(0, 30),
    st.integers(0, 400),
    st.integers(0, 2**16),
)
def test_within_length_keeps_to_the_language_and_the_bounds(pattern, lo, extra, seed):
    from ministruct.grammar.regex.parse import parse_regex
    from ministruct.grammar.schema.budget import within_length
    from ministruct.grammar.schema.lengths import length_bounds
    from ministruct.grammar.schema.patterns import searched_regex

    g = parse_regex(searched_regex(pattern))
    got = within_length(g.rules[g.root], lo, lo + extra)
    if got is None:
        return
    a, b = length_bounds(got)
    assert lo <= a and b is not None and b <= lo + extra
    from ministruct.grammar.ir import Grammar

    for t in sample_strings(Grammar({"root": got}, root="root"), random.Random(seed), count=5):
        assert lo <= len(t) <= lo + extra and re.search(pattern, t), (pattern, t)


def test_a_maxlength_past_the_repetition_limit_is_the_limit():
    g = schema_to_grammar({"type": "string", "maxLength": 1_000_000})
    assert accepts(g, json.dumps("a" * 10)) and accepts(g, json.dumps("a" * MAX_REPEAT))
    assert not accepts(g, json.dumps("a" * (MAX_REPEAT + 1)))
    with pytest.raises(SchemaError, match="minLength.*beyond the compile limit"):
        schema_to_grammar({"type": "string", "minLength": 1_000_000})


def test_a_not_pattern_product_past_its_limit_is_refused_by_pointer_and_limit():
    schema = {"type": "string", "maxLength": 20000, "not": {"pattern": "a[0-9a-f]{40}"}}
    with pytest.raises(SchemaError, match=r"at /not: keyword 'not' .*too large.*more than 20000 rules \(the limit\)"):
        schema_to_grammar(schema)


# ------------------------------------------------------------ format: regex

VALID_REGEXES = ["^[a-z]+$", "a|b", "(foo|bar)*", "^\\d{3}-\\d{4}$", "x{2,5}?", "(?:ab)+c", "[^\\s,]+", "(?=a)a", ""]
INVALID_REGEXES = ["a{,3}", "(?<n>x)", "[", "a**", "\\c", "(?P<n>x)", "a{3,2}", "[z-a]", "]", "(?<=a)b", "\\1(a)"]


def test_format_regex_accepts_patterns_both_dialects_read_and_refuses_the_rest():
    g = schema_to_grammar({"type": "string", "format": "regex"})
    for p in VALID_REGEXES:
        assert accepts(g, json.dumps(p)), p
    for p in INVALID_REGEXES:
        assert not accepts(g, json.dumps(p)), p


def _python_valid(p: str) -> bool:
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        try:
            re.compile(p)
            return True
        except (re.error, FutureWarning, DeprecationWarning):
            return False


def test_format_regex_samples_compile_in_python_and_in_javascript():
    g = schema_to_grammar({"type": "string", "format": "regex"}, whitespace="compact")
    texts = [json.loads(t) for t in sample_strings(g, random.Random(5), max_depth=14, count=600)]
    assert all(_python_valid(t) for t in texts), [t for t in texts if not _python_valid(t)][:5]
    assert all(_valid({"format": "regex"}, t) for t in texts)
    node = shutil.which("node")
    if node is None:
        pytest.skip("node (an ECMA-262 engine) is not installed: Python's re checked only")
    script = (
        "const xs=JSON.parse(require('fs').readFileSync(0,'utf8'));const bad=[];"
        "for(const x of xs){for(const f of ['','u']){try{new RegExp(x,f)}catch(e){bad.push([x,f])}}}"
        "console.log(JSON.stringify(bad))"
    )
    out = subprocess.run([node, "-e", script], input=json.dumps(texts), capture_output=True, text=True, check=True)
    assert json.loads(out.stdout) == []


@settings(max_examples=40)
@given(
    st.lists(st.sampled_from(["a", "^a", "b$", "[0-9]", "^[a-z]+$", "ab|ba"]), min_size=2, max_size=3, unique=True),
    st.lists(st.text(st.sampled_from("ab0z\n"), max_size=6), min_size=1, max_size=8),
)
def test_patterns_of_several_allof_parts_all_hold(patterns, texts):
    from grammar.helpers import check_strings_against_jsonschema

    check_strings_against_jsonschema({"type": "string", "allOf": [{"pattern": p} for p in patterns]}, texts)


_ITEM_VALUES = [None, True, 0, 1, 2, "a", "b", [], {}]


@st.composite
def _contains_parts(draw):
    part: dict = {"contains": draw(st.sampled_from([{"type": "string"}, {"type": "integer"}, {"const": 1}, {}]))}
    if draw(st.booleans()):
        part["minContains"] = draw(st.integers(0, 2))
    if draw(st.booleans()):
        part["maxContains"] = draw(st.integers(0, 2))
    return part


@settings(max_examples=40)
@given(
    st.lists(_contains_parts(), min_size=2, max_size=3),
    st.booleans(),
    st.lists(st.lists(st.sampled_from(_ITEM_VALUES), max_size=5), min_size=1, max_size=10),
    st.integers(0, 2**16),
)
def test_contains_of_several_allof_parts_each_count(parts, negated, arrays, seed):
    schema = {"type": "array", "maxItems": 5, "allOf": parts}
    if negated:
        schema = {"type": "array", "maxItems": 5, "not": {"allOf": parts}}
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, whitespace="compact")
    except SchemaError as e:
        assert "accepts no value" in str(e) or "the limit" in str(e), e
        return
    for a in arrays:
        assert accepts(g, json.dumps(a, separators=(",", ":"))) == validator.is_valid(a), (schema, a)
    for t in sample_strings(g, random.Random(seed), count=10):
        assert validator.is_valid(json.loads(t)), (schema, t)


def test_a_large_oneof_told_apart_by_an_optional_tag_needs_no_exactly_one(monkeypatch):
    """Eleven object branches whose `kind` lists a value of its own, `kind` not required: an
    object without it satisfies them all. Where exactly-one would need more than its limit of
    branches (made small here), `kind` is required (a restriction): then no two branches
    share an instance."""
    from ministruct.grammar.schema import logic

    monkeypatch.setattr(logic, "MAX_BRANCHES", 4)
    base = {"type": "object", "properties": {f"p{i}": {"type": "integer"} for i in range(6)}}
    branches = [
        {"allOf": [base, {"properties": {"kind": {"enum": [f"k{i}"]}, f"x{i}": {"type": "string"}}}]} for i in range(11)
    ]
    schema = {"type": "object", "oneOf": branches}
    g = schema_to_grammar(schema, whitespace="compact")
    checks = [Draft202012Validator(b) for b in branches]
    for t in sample_strings(g, random.Random(3), count=60):
        value = json.loads(t)
        assert sum(c.is_valid(value) for c in checks) == 1 and "kind" in value, t
    assert accepts(g, '{"p0":1,"kind":"k3","x3":"a"}') and not accepts(g, '{"p0":1}')
    assert any("/oneOf" in w and "'kind' present" in w for w in g.warnings), g.warnings


def test_unique_items_past_the_any_order_limit_are_listed_order_and_say_so():
    """Integers 0..99, unique: more sets than the any-order machine holds, so arrays are
    generated ascending (a restriction, said in a warning); never a duplicate."""
    schema = {"type": "array", "items": {"type": "integer", "minimum": 0, "maximum": 99}, "uniqueItems": True}
    g = schema_to_grammar(schema, whitespace="compact")
    assert any("/uniqueItems" in w and "a restriction" in w for w in g.warnings), g.warnings
    check = Draft202012Validator(schema)
    for t in sample_strings(g, random.Random(5), count=40):
        value = json.loads(t)
        assert check.is_valid(value) and value == sorted(value), t
    assert accepts(g, "[1,5,70]") and not accepts(g, "[5,1]") and not accepts(g, "[3,3]")


def test_a_tuple_with_contains_may_write_the_item_it_asks_for_past_the_tuple():
    """The generation language closes a tuple after its prefixItems (no `items`), but not
    when `contains` asks for an item the tuple's own items cannot be: `[1, "a"]` is valid and
    the schema does not accept "no value" (found by hypothesis through an if/else)."""
    schema = {"type": "array", "prefixItems": [{"type": "integer"}], "contains": {"type": "string"}}
    g = schema_to_grammar(schema)
    assert accepts(g, '[1, "a"]') and not accepts(g, "[1]") and not accepts(g, '["a"]')
    check = Draft202012Validator(schema)
    for t in sample_strings(g, random.Random(2), count=30):
        assert check.is_valid(json.loads(t)), t


# ------------------------------------------------------------ the older array forms in allOf

_ITEM = st.sampled_from([{"type": "integer"}, {"type": "string"}, {"enum": [1, "a"]}, True, False])
_ARRAY_PART = st.one_of(
    st.builds(
        lambda xs, rest: {"items": xs, **rest},
        st.lists(_ITEM, max_size=3),
        st.sampled_from([{}, {"additionalItems": False}, {"additionalItems": {"type": "integer"}}]),
    ),
    st.builds(
        lambda x, extra: {"items": x, **extra},
        st.sampled_from([{"type": "integer"}, {"type": "string"}, {"enum": [1, "a"]}]),  # (the validator
        st.sampled_from([{}, {"additionalItems": False}, {"minItems": 2}]),  # fails on a bool beside additionalItems)
    ),
)


@settings(max_examples=60)
@given(
    st.lists(_ARRAY_PART, min_size=2, max_size=3),
    st.lists(st.lists(st.sampled_from([1, 2, "a", "b", None]), max_size=4), min_size=1, max_size=12),
)
def test_older_array_forms_in_several_parts_agree_with_jsonschema(parts, arrays):
    """`items` as a list with `additionalItems` (drafts 4-7) in several allOf parts: the
    positions and the rest of each part, both ways on every array (draft-07's validator)."""
    from jsonschema import Draft7Validator

    schema = {"$schema": "http://json-schema.org/draft-07/schema#", "type": "array", "allOf": parts}
    _agrees_on_arrays(schema, Draft7Validator(schema), arrays)


def _agrees_on_arrays(schema: dict, validator, arrays: list, seed: int | None = None) -> None:
    """The compact grammar of `schema` accepts exactly the arrays the validator does, and
    (given a seed) generates valid ones; a refusal says the schema accepts no value."""
    try:
        g = schema_to_grammar(schema, whitespace="compact")
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        assert not any(validator.is_valid(a) for a in arrays), schema
        return
    for a in arrays:
        assert accepts(g, json.dumps(a, separators=(",", ":"))) == validator.is_valid(a), (schema, a)
    if seed is not None:
        for t in sample_strings(g, random.Random(seed), count=10):
            assert validator.is_valid(json.loads(t)), (schema, t)


# ------------------------------------------------------------ contains over listed item values

_LISTED = st.lists(st.sampled_from(_ITEM_VALUES), min_size=1, max_size=5, unique_by=json.dumps)


@settings(max_examples=60)
@given(
    _LISTED,
    st.lists(_contains_parts(), min_size=1, max_size=5),
    st.lists(st.lists(st.sampled_from(_ITEM_VALUES), max_size=5), min_size=1, max_size=10),
    st.integers(0, 2**16),
)
def test_contains_over_listed_items_counts_each_part(values, parts, arrays, seed):
    """Items that are a few listed values: each value matches each `contains` or not (the
    validator says which), so any number of parts is counted, both ways on every array."""
    schema = {"type": "array", "items": {"enum": values}, "allOf": parts}
    _agrees_on_arrays(schema, Draft202012Validator(schema), arrays, seed)


@settings(max_examples=40)
@given(
    st.lists(_LISTED, min_size=2, max_size=6),
    st.lists(st.lists(st.sampled_from(_ITEM_VALUES), max_size=4), min_size=1, max_size=10),
    st.integers(0, 2**16),
)
def test_exactly_one_of_arrays_of_listed_values(enums, arrays, seed):
    """`oneOf` of arrays each of its own listed values (the empty array, and arrays of
    shared values, are in several): exactly one branch, both ways, and samples valid."""
    schema = {"oneOf": [{"type": "array", "maxItems": 6, "items": {"enum": e}} for e in enums]}
    _agrees_on_arrays(schema, Draft202012Validator(schema), arrays, seed)


@settings(max_examples=30, deadline=None)
@given(st.integers(2, 9), st.booleans(), st.integers(0, 2**16))
def test_a_catch_all_branch_excluding_the_listed_tags_is_told_apart_too(n, closed, seed):
    """A `oneOf` of a catch-all branch (its `kind` required and none of the listed ones, as
    angular.json's builders are) and branches whose `kind` lists one value each, not
    required: `{}` satisfies all of those. Past exactly-one's limit, `kind` is required:
    never two branches at once, no false accept."""
    import itertools

    from ministruct.grammar.schema import logic

    kinds = [f"k{i}" for i in range(n)]
    extra = {"additionalProperties": False} if closed else {}
    branches = [
        {
            "type": "object",
            "properties": {"kind": {"type": "string", "not": {"enum": kinds}}, "x": {"type": "integer"}},
            "required": ["kind"],
            **extra,
        }
    ] + [
        {"type": "object", "properties": {"kind": {"const": k}, "x": {"enum": [i, 99]}}, **extra}
        for i, k in enumerate(kinds)
    ]
    schema = {"oneOf": branches}
    old = logic.MAX_BRANCHES
    logic.MAX_BRANCHES = 4
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    finally:
        logic.MAX_BRANCHES = old
    checks = [Draft202012Validator(b) for b in branches]
    validator = Draft202012Validator(schema)
    told_apart = any("/oneOf" in w and "'kind' present" in w for w in g.warnings)
    assert told_apart or n < 4, g.warnings
    for t in sample_strings(g, random.Random(seed), count=20):
        value = json.loads(t)
        assert sum(c.is_valid(value) for c in checks) == 1 and ("kind" in value or not told_apart), t
    values = [{}, {"x": 99}, {"x": 0}] + [
        {"kind": k, "x": x} for k, x in itertools.product(["k0", "k1", "zz", ""], [0, 1, 99, "a"])
    ]
    for v in values:
        for keys in itertools.permutations(v):
            if accepts(g, json.dumps({k: v[k] for k in keys})):
                assert validator.is_valid(v), (schema, v)


@settings(max_examples=40, deadline=None)
@given(
    st.lists(st.sampled_from(["a", "b", "c"]), max_size=3, unique=True),
    st.sampled_from([0, 1, 2, 3]),
    st.sampled_from([None, 1, 2, 4, 5000]),
    st.lists(st.dictionaries(st.sampled_from(["a", "b", "c", "x", "y", "z"]), st.just(1), max_size=6), max_size=8),
)
def test_property_counts_past_the_listed_names_are_counted_once(names, lo, hi, objects):
    """min/maxProperties of a map (`maxProperties: 10000` beside free names): the members
    so far at a listed name are at most the names before it, the rest is one count;
    both ways against jsonschema, in the order the grammar writes listed names first."""
    schema = {
        "type": "object",
        "properties": {n: {"type": "integer"} for n in names},
        "additionalProperties": {"type": "integer"},
        "minProperties": lo,
    }
    if hi is not None:
        schema["maxProperties"] = hi
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        return
    for o in objects:
        ordered = {**{n: o[n] for n in names if n in o}, **{k: v for k, v in o.items() if k not in names}}
        assert accepts(g, json.dumps(ordered)) == validator.is_valid(o), (schema, ordered)


_NAME_BRANCH = st.sampled_from(
    [
        {"pattern": "^[a-c]+$"},
        {"type": "string", "pattern": "^x"},
        {"pattern": "b"},
        {"enum": ["zz", "ab"]},
        {"const": "q"},
        {"type": "number", "minimum": 1},
        {"$ref": "#/$defs/digits"},
    ]
)


@settings(max_examples=60, deadline=None)
@given(
    st.sampled_from(["anyOf", "oneOf"]),
    st.lists(_NAME_BRANCH, min_size=1, max_size=3),
    st.booleans(),
    st.lists(st.text(st.sampled_from("abcxzq1"), max_size=4), min_size=1, max_size=8),
)
def test_property_names_of_several_branches_beside_patterns(kw, branches, closed, keys):
    """propertyNames an anyOf (or a oneOf of patterns no name matches together) of name
    patterns and lists, through $refs, beside patternProperties: each key both ways."""
    schema = {
        "$defs": {"digits": {"type": "string", "pattern": "^[1-9][0-9]*$"}},
        "type": "object",
        "propertyNames": {kw: branches},
        "patternProperties": {"^[a-z]": {"type": "integer"}},
        "additionalProperties": False if closed else {"type": "integer"},
    }
    validator = Draft202012Validator(schema)
    try:
        g = schema_to_grammar(schema, extra_properties="spec")
    except SchemaError as e:
        assert kw == "oneOf" or "accepts no value" in str(e), e  # (a oneOf whose patterns may meet)
        return
    for k in keys:
        assert accepts(g, json.dumps({k: 1})) == validator.is_valid({k: 1}), (schema, k)


@settings(max_examples=30, deadline=None)
@given(
    st.lists(st.sampled_from(["^[a-z0-9-]+$", "^a$", "^b-1$", "^c", "1$", "^ab", "x", "^z-[0-9]$", "--"]), min_size=1),
    st.integers(9, 16),
    st.lists(st.text(st.sampled_from("abcxz1-"), max_size=4), min_size=1, max_size=8),
)
def test_many_pattern_properties_sort_each_key(pats, n, keys):
    """Up to 16 patterns (a dictionary of hash names beside a catch-all), each with a
    schema of its own, additionalProperties false: each key and value both ways."""
    pats = list(dict.fromkeys(pats + [f"^h{i}$" for i in range(n)]))[:16]
    schema = {
        "type": "object",
        "patternProperties": {p: {"enum": [i, 99]} for i, p in enumerate(pats)},
        "additionalProperties": False,
    }
    validator = Draft202012Validator(schema)
    g = schema_to_grammar(schema, extra_properties="spec")
    for k in keys + ["h3", "h12"]:
        for v in (0, 1, 99):
            assert accepts(g, json.dumps({k: v})) == validator.is_valid({k: v}), (schema, k, v)
