"""JSON-Schema-Test-Suite (draft 2020-12 core files) against schema_to_grammar.

For every schema that compiles (whitespace="flexible"), each instance is serialized
with `json.dumps` after `canonical_order` (object keys put in the order the grammar
generates: the schema's `properties` order, then required names not listed, then the
rest in their original order; anyOf/oneOf branches picked by the validator). The
grammar must accept it iff the suite says valid. Zero false accepts; false rejects only
as listed below with their reason. Schemas that do not compile must raise SchemaError.
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from ministruct.engine.automaton import accepts
from ministruct.errors import SchemaError
from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

SUITE = Path(__file__).resolve().parents[3] / ".." / "shared" / "suites" / "jsts" / "draft2020-12"
FILES = sorted(p.stem for p in SUITE.glob("*.json")) if SUITE.is_dir() else []

# (file, case description, test description) -> why the grammar rejects a valid instance
KNOWN_FALSE_REJECTS = {
    **{
        ("format", c, t): "formats are enforced (the suite treats core `format` as annotation only)"
        for c, t in [
            ("email format", "invalid email string is only an annotation by default"),
            ("ipv4 format", "invalid ipv4 string is only an annotation by default"),
            ("ipv6 format", "invalid ipv6 string is only an annotation by default"),
            ("hostname format", "invalid hostname string is only an annotation by default"),
            ("date format", "invalid date string is only an annotation by default"),
            ("date-time format", "invalid date-time string is only an annotation by default"),
            ("time format", "invalid time string is only an annotation by default"),
            ("json-pointer format", "invalid json-pointer string is only an annotation by default"),
            ("uri format", "invalid uri string is only an annotation by default"),
            ("uri-reference format", "invalid uri-reference string is only an annotation by default"),
            ("uuid format", "invalid uuid string is only an annotation by default"),
            ("duration format", "invalid duration string is only an annotation by default"),
        ]
    },
    (
        "const",
        "const with object",
        "same object with different property order is valid",
    ): "enum/const objects are written in the schema's key order",
    (
        "const",
        "const with 0 does not match other zero-like types",
        "float zero is valid",
    ): "enum/const numbers are written as in the schema (0, not 0.0)",
    ("const", "const with 1 does not match true", "float one is valid"): "written as in the schema (1, not 1.0)",
    (
        "const",
        "float and integers are equal up to 64-bit representation limits",
        "float is valid",
    ): "written as in the schema (an integer, not its float spelling)",
    ("enum", "enum with 0 does not match false", "float zero is valid"): "written as in the schema (0, not 0.0)",
    ("enum", "enum with [0] does not match [false]", "[0.0] is valid"): "written as in the schema",
    ("enum", "enum with 1 does not match true", "float one is valid"): "written as in the schema (1, not 1.0)",
    ("enum", "enum with [1] does not match [true]", "[1.0] is valid"): "written as in the schema",
    (
        "type",
        "integer type matches integers",
        "a float with zero fractional part is an integer",
    ): "integers are written without a fraction",
    (
        "vocabulary",
        "schema that uses custom metaschema with with no validation vocabulary",
        "no validation: invalid number, but it still validates",
    ): "$vocabulary is not honoured: validation keywords always apply",
}


def _run(stem: str, folder: Path = SUITE):
    cases = json.loads((folder / f"{stem}.json").read_text())
    compiled = refused = 0
    false_accepts, false_rejects = [], []
    for case in cases:
        try:
            g = schema_to_grammar(case["schema"], whitespace="flexible", extra_properties="spec")
        except SchemaError as e:
            assert "\n" not in str(e) and " at /" in str(e), str(e)
            refused += 1
            continue
        compiled += 1
        for t in case["tests"]:
            got = accepts(g, json.dumps(canonical_order(t["data"], case["schema"])))
            if got and not t["valid"]:
                false_accepts.append((case["description"], t["description"]))
            elif t["valid"] and not got:
                false_rejects.append((case["description"], t["description"]))
    return compiled, refused, false_accepts, false_rejects


@pytest.mark.skipif(not FILES, reason="JSON-Schema-Test-Suite not found at ../shared/suites/jsts")
@pytest.mark.parametrize("stem", FILES)
def test_suite_file(stem):
    compiled, refused, fa, fr = _run(stem)
    assert fa == [], f"false accepts: {fa}"
    unexplained = [x for x in fr if (stem, *x) not in KNOWN_FALSE_REJECTS]
    assert unexplained == [], f"unlisted false rejects: {unexplained}"


@pytest.mark.skipif(not FILES, reason="JSON-Schema-Test-Suite not found at ../shared/suites/jsts")
def test_overall_compile_rate():
    total = sum(len(json.loads((SUITE / f"{s}.json").read_text())) for s in FILES)
    compiled = sum(
        _run(s)[0]
        for s in ("type", "properties", "required", "enum", "const", "ref", "allOf", "anyOf", "items", "prefixItems")
    )
    assert total >= 383 and compiled >= 100


FORMATS = SUITE / "optional" / "format"
# (case description, test description) -> why the grammar rejects a valid address
EMAIL_FALSE_REJECTS = {
    ("validation of e-mail addresses", d): "a quoted local part or an address literal is valid and not generated"
    for d in (
        "a quoted string with a space in the local part is valid",
        "a quoted string with a double dot in the local part is valid",
        "a quoted string with a @ in the local part is valid",
        "an IPv4-address-literal after the @ is valid",
        "an IPv6-address-literal after the @ is valid",
    )
}


@pytest.mark.skipif(not (FORMATS / "email.json").exists(), reason="the suite's optional/format files not found")
def test_the_suites_email_addresses():
    """`format: email` is RFC 5321's dot-string at a host name: every address of the suite's
    optional/format/email.json that is one is accepted (a tilde, an apostrophe and the rest
    of atext included), no invalid one is, and the quoted local parts and address literals
    it also calls valid are listed with the reason."""
    compiled, refused, false_accepts, false_rejects = _run("email", FORMATS)
    assert compiled and not refused
    assert false_accepts == []
    assert set(false_rejects) == set(EMAIL_FALSE_REJECTS)


def test_email_local_parts_are_rfc_5321_dot_strings_of_any_length():
    """A local part is Atom *("." Atom) as RFC 5321 writes it: no count of atoms or of
    characters (its 64-octet figure is a size limit, not syntax). Six atoms, 70 characters
    of atext: accepted; a leading, trailing or doubled dot: refused."""
    grammar = schema_to_grammar({"type": "string", "format": "email"})
    long_local = ".".join(["a1!#$%&'*+/=?^_`{|}~-"[:11]] * 6)
    assert len(long_local) > 64
    for text, ok in [
        (long_local + "@example.com", True),
        ("x" * 200 + "@example.com", True),
        ("." + long_local + "@example.com", False),
        (long_local + ".@example.com", False),
        ("a..b@example.com", False),
    ]:
        assert accepts(grammar, json.dumps(text).encode()) is ok, text
