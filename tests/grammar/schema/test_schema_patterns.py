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


def test_a_product_too_large_is_a_part_of_the_pattern_that_fits():
    # (schema_budget: past the product's limit, strings the pattern matches as a whole,
    # the length budget shared out over its parts; every string stays valid)
    g = schema_to_grammar({"type": "string", "pattern": "a|b[0-9a-f]{40}c", "maxLength": MAX_PRODUCT_RULES})
    assert accepts(g, json.dumps("a")) and accepts(g, json.dumps("b" + "0" * 40 + "c"))
    assert not accepts(g, json.dumps("xyz")) and not accepts(g, json.dumps("a" * (MAX_PRODUCT_RULES + 1)))


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


# strings near each format: valid ones of several lengths, and near misses
FORMAT_TEXTS = {
    "date": ["2026-01-05", "2025-12-31", "2026-02-29", "1999-01-01", "2026-1-05", "", "2026-01-05\n"],
    "time": ["12:30:00Z", "12:30:00.5+01:00", "23:59:60Z", "12:30:00.123456789Z", "12:30Z", "02:00:00z"],
    "date-time": ["2026-01-05T12:30:00Z", "2026-01-05t12:30:00.25-05:00", "2026-01-05 12:30:00Z"],
    "ipv4": ["10.0.0.1", "192.168.0.1", "1.2.3.4", "256.1.1.1", "10.0.0", "127.0.0.1"],
    "uuid": ["0a2b3c4d-1111-2222-3333-444455556666", "fa2b3c4d-1111-2222-3333-444455556666", "0a2b"],
    "duration": ["P1D", "PT1H", "P12Y3M", "P1W", "PT36H", "P1Y2D", "P"],
}
FORMAT_RESTRICTIONS = [
    {"maxLength": 10},
    {"minLength": 11},
    {"maxLength": 3},
    {"pattern": "^1"},
    {"pattern": "0"},
    {"pattern": "5$", "maxLength": 20},
    {"not": {"pattern": "^10\\."}},
    {"not": {"pattern": "Z$"}, "minLength": 9},
]


@pytest.mark.parametrize("fmt", sorted(FORMAT_TEXTS))
@pytest.mark.parametrize("extra", FORMAT_RESTRICTIONS, ids=lambda e: json.dumps(e, sort_keys=True))
def test_a_format_with_a_pattern_or_length_is_both_at_once(fmt, extra):
    # oracle: the format alone (our grammar, held to the suite's format files elsewhere),
    # Python's len and re.search; the product must be exactly their conjunction
    import re

    alone = schema_to_grammar({"type": "string", "format": fmt})
    schema = {"type": "string", "format": fmt, **extra}
    try:
        g = schema_to_grammar(schema)
    except SchemaError as e:
        assert "accepts no value" in str(e), e
        g = None
    for t in FORMAT_TEXTS[fmt]:
        want = (
            accepts(alone, json.dumps(t))
            and extra.get("minLength", 0) <= len(t) <= extra.get("maxLength", len(t))
            and ("pattern" not in extra or re.search(extra["pattern"], t) is not None)
            and ("not" not in extra or re.search(extra["not"]["pattern"], t) is None)
        )
        assert (g is not None and accepts(g, json.dumps(t))) == want, (schema, t)


def test_a_format_whose_product_is_too_large_is_refused_by_name():
    # an e-mail's host name counts up to 62 characters in each of four labels: some 1,700
    # DFA states (a URI 784): exact products of more than 400 give way to a part of the
    # format that fits (length bounds) or a smaller part of the format (patterns), but what
    # must be avoided (`not`) has no such part
    g = schema_to_grammar({"type": "string", "format": "email", "maxLength": 64})
    assert accepts(g, json.dumps("jane@example.com")) and not accepts(g, json.dumps("a" * 80 + "@example.com"))
    g = schema_to_grammar({"type": "string", "format": "uri", "pattern": "^https://"})
    assert accepts(g, json.dumps("https://example.com/x")) and not accepts(g, json.dumps("http://example.com/x"))
    schema = {"type": "string", "format": "email", "maxLength": 254, "not": {"pattern": "^admin@"}}
    with pytest.raises(SchemaError, match="at /not: keyword 'not' together with format 'email' is too large"):
        schema_to_grammar(schema)
    g = schema_to_grammar(schema, lenient=True)
    assert accepts(g, json.dumps("admin@example.com"))  # the format alone, as the warning says
