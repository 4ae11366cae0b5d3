"""`pattern` with minLength/maxLength against the jsonschema validator (Python `re` search)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from grammar.helpers import check_strings_against_jsonschema
from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import schema_to_grammar
from ministruct.grammar.schema.patterns import MAX_PRODUCT_RULES

# patterns the length-restriction shortcuts cannot take: alternation at the top, anchors
# inside, `$` with a search, several unbounded parts
PATTERNS = [
    "a|bc",
    "^(ab|c)+$",
    "x$|^y",
    "[0-9]{2}-[0-9]+",
    "^a.*b$",
    "(?i)ab|cd",
    "^[a-z]+(-[a-z]+)*$",
    "é|ü",
    "^$",
    "b+$",
    "(a|b)c*d",
]
_TEXT = st.text(st.sampled_from(list("abcdxy-0129é\n") + ["\u00fc", "\U0001f600"]), max_size=8)


@st.composite
def _bounds(draw):
    lo = draw(st.integers(0, 4))
    hi = draw(st.one_of(st.none(), st.integers(lo, lo + 4)))
    return lo, hi


@settings(
    max_examples=int(os.environ.get("MINISTRUCT_HYPOTHESIS_EXAMPLES", 150)),
    deadline=None,
    suppress_health_check=[HealthCheck.too_slow],
)
@given(st.sampled_from(PATTERNS), _bounds(), st.lists(_TEXT, min_size=1, max_size=6))
def test_pattern_and_length_agree_with_jsonschema(pattern, bounds, texts):
    lo, hi = bounds
    schema = {"type": "string", "pattern": pattern, "minLength": lo}
    if hi is not None:
        schema["maxLength"] = hi
    check_strings_against_jsonschema(schema, texts)


def test_impossible_bounds_accept_nothing():
    with pytest.raises(SchemaError, match="accepts no value"):
        schema_to_grammar({"type": "string", "pattern": "^a$|^bb$", "minLength": 4, "maxLength": 4})
    g = schema_to_grammar(
        {"anyOf": [{"type": "string", "pattern": "^a$|^bb$", "minLength": 4, "maxLength": 4}, {"type": "integer"}]}
    )
    assert accepts(g, "1") and not any(accepts(g, json.dumps(t)) for t in ["abab", "bb\n", "a", "bbbb"])


def test_a_product_too_large_is_refused_by_name():
    with pytest.raises(SchemaError, match="pattern.*too large"):
        schema_to_grammar({"type": "string", "pattern": "a|b[0-9a-f]{40}c", "maxLength": MAX_PRODUCT_RULES})


def test_a_pattern_syntax_error_gives_the_column_in_the_pattern():
    # issue 29: column 15, inside the regex the pattern is wrapped in; --regex 'abc)' says 4
    from ministruct.errors import SchemaError
    from ministruct.grammar.constraint import Constraint

    with pytest.raises(SchemaError) as e:
        Constraint.from_json_schema({"type": "string", "pattern": "abc)"})
    assert (
        str(e.value)
        == '<schema>: at /pattern: pattern "abc)" cannot be enforced: invalid regex: unbalanced parenthesis at column 4'
    )
