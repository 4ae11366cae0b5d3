"""`not: {pattern: Q}`: strings that avoid Q (with pattern and length siblings), against jsonschema."""

from __future__ import annotations

import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammar.helpers import check_strings_against_jsonschema
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar

AVOID = ["x", "^a", "b$", "^[.,*\\-\\s{}()]+$", "ab|ba", "(?i)Q", "\\d{2}"]
PATTERNS = [None, "a", "^[a-z]*$", "b|x"]
_TEXT = st.text(st.sampled_from(list("abxqQ01.- \n") + ["é"]), max_size=7)


@settings(
    max_examples=int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(
    st.sampled_from(AVOID),
    st.sampled_from(PATTERNS),
    st.integers(0, 2),
    st.one_of(st.none(), st.integers(2, 6)),
    st.lists(_TEXT, min_size=1, max_size=6),
)
def test_strings_avoiding_a_pattern_agree_with_jsonschema(avoid, pattern, lo, hi, texts):
    schema: dict = {"type": "string", "not": {"pattern": avoid}, "minLength": lo}
    if pattern is not None:
        schema["pattern"] = pattern
    if hi is not None:
        schema["maxLength"] = hi
    check_strings_against_jsonschema(schema, texts)


def test_other_types_are_untouched_and_several_nots_all_hold():
    g = schema_to_grammar({"not": {"pattern": "x"}})  # `pattern` holds for non-strings: `not` fails them
    assert not accepts(g, "1") and not accepts(g, '["x"]') and accepts(g, '"abc"') and not accepts(g, '"axc"')
    g = schema_to_grammar({"not": {"type": "string", "pattern": "x"}})
    assert accepts(g, "1") and accepts(g, '["x"]') and accepts(g, '"abc"') and not accepts(g, '"axc"')
    g = schema_to_grammar({"not": {"type": "string", "minLength": 2}})
    assert accepts(g, '"a"') and not accepts(g, '"ab"') and accepts(g, "12")
    g = schema_to_grammar({"allOf": [{"not": {"pattern": "x"}}, {"not": {"pattern": "y"}}]})
    assert accepts(g, '"ab"') and not accepts(g, '"ax"') and not accepts(g, '"ya"')
    with pytest.raises(SchemaError, match="'not'"):
        schema_to_grammar({"not": {"type": "string", "format": "email"}})


@pytest.mark.parametrize(
    "schema",
    [
        {"type": "string", "pattern": 5, "not": {"pattern": "x"}},
        {"type": "string", "pattern": 5, "maxLength": 3},
    ],
)
def test_a_pattern_that_is_not_a_string_is_a_schema_error(schema):
    with pytest.raises(SchemaError, match="at /pattern: pattern must be a string"):
        schema_to_grammar(schema)
