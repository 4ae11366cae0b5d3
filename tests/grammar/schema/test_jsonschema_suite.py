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
# the suite's remote documents, where its $refs name them (a local mapping: no server, no network)
DOCUMENTS = {"http://localhost:1234/": str(SUITE.parent / "remotes")}

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
            ("regex format", "invalid regex string is only an annotation by default"),
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
    ("oneOf", "oneOf", "second oneOf valid"): (
        "not-an-integer is generated for the other types only: a number that is not an integer (2.5) is not"
    ),
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
            g = schema_to_grammar(case["schema"], whitespace="flexible", extra_properties="spec", documents=DOCUMENTS)
        except SchemaError as e:
            assert "\n" not in str(e) and " at /" in str(e), str(e)
            refused += 1
            continue
        compiled += 1
        for t in case["tests"]:
            got = accepts(g, json.dumps(canonical_order(t["data"], case["schema"], DOCUMENTS)))
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


# the suite as a generation language: schemas compiled (of 383), and files where every
# case compiles and every instance agrees (what llguidance's runner reports per file)
COMPILED_AT_LEAST = 344
FILES_ALL_AGREE_AT_LEAST = 26


@pytest.mark.skipif(not FILES, reason="JSON-Schema-Test-Suite not found at ../shared/suites/jsts")
def test_the_whole_suites_figures():
    """Every core file: at least COMPILED_AT_LEAST schemas compile, no invalid instance is
    accepted, and at least FILES_ALL_AGREE_AT_LEAST files agree on every case."""
    compiled = agreeing = 0
    for stem in FILES:
        c, refused, fa, fr = _run(stem)
        assert fa == [], (stem, fa)
        compiled += c
        agreeing += refused == 0 and fr == []
    assert compiled >= COMPILED_AT_LEAST and agreeing >= FILES_ALL_AGREE_AT_LEAST, (compiled, agreeing)


FORMATS = SUITE / "optional" / "format"
FORMAT_FILES = sorted(p.stem for p in FORMATS.glob("*.json")) if FORMATS.is_dir() else []
# formats a validator can check and ministruct does not enforce: the schema is refused
# with the keyword's position (formats.KNOWN_UNSUPPORTED)
FORMATS_REFUSED = {
    "idn-email": "internationalized addresses are not generated",
    "idn-hostname": "U-labels (IDNA 2008's rules for Unicode labels) are not generated",
    "iri": "internationalized URIs are not generated",
    "iri-reference": "internationalized URIs are not generated",
    "uri-template": "RFC 6570 templates are not generated",
    "relative-json-pointer": "not generated",
}
LEAP = "a leap second (:60) is generated at offset zero only: each other offset pairs with one local hh:mm"
# (file, case description, test description) -> why the grammar rejects a valid string
PYTHON_REFUSES = "valid ECMA 262 that Python's re (the jsonschema package's check) refuses: not generated"
FORMAT_FALSE_REJECTS = {
    **{
        ("ecmascript-regex", c, t): PYTHON_REFUSES
        for c, t in (
            ("ECMA 262 named groups and backreferences are valid", "an ECMA 262 named group (?<name>...)"),
            ("ECMA 262 named groups and backreferences are valid", "an ECMA 262 named backreference \\k<name>"),
            ("ECMA 262 lookbehind is valid, including variable width", "a variable-width lookbehind (ES2018)"),
            ("ECMA 262 character classes and escapes", "an empty character class is valid ECMA 262"),
            ("ECMA 262 character classes and escapes", "a negated empty character class is valid ECMA 262"),
            ("ECMA 262 character classes and escapes", "a control escape \\cA is valid ECMA 262"),
        )
    },
    **{
        ("time", "validation of time strings", t): LEAP
        for t in (
            "valid leap second, positive time-offset",
            "valid leap second, large positive time-offset",
            "valid leap second, negative time-offset",
            "valid leap second, large negative time-offset",
        )
    },
    ("date-time", "validation of date-time strings", "a valid date-time with a leap second, with minus offset"): LEAP,
    **{
        (
            "email",
            "validation of e-mail addresses",
            t,
        ): "a quoted local part or an address literal is valid and not generated"
        for t in (
            "a quoted string with a space in the local part is valid",
            "a quoted string with a double dot in the local part is valid",
            "a quoted string with a @ in the local part is valid",
            "an IPv4-address-literal after the @ is valid",
            "an IPv6-address-literal after the @ is valid",
        )
    },
    ("hostname", "validation of host names", "single label starting with digit"): (
        "the last label starts with a letter (RFC 1123 2.1: it is never all digits)"
    ),
    ("hostname", "validation of host names", "maximum label length (63)"): (
        "labels of at most 62 characters, so that four of them stay under the 253 limit"
    ),
}
# case descriptions whose every valid string is rejected, and why
FORMAT_CASES_REJECTED = {
    ("hostname", "validation of A-label (punycode) host names"): (
        "no label has `--` in its third and fourth places: RFC 5890 reserves them, and an "
        "A-label (`xn--`) must be valid Punycode of permitted code points, which a grammar cannot check"
    ),
}


@pytest.mark.skipif(not FORMAT_FILES, reason="the suite's optional/format files not found")
@pytest.mark.parametrize("stem", FORMAT_FILES)
def test_the_suites_formats(stem):
    """Every optional/format file of the suite: no invalid string accepted; every valid one
    accepted but those listed with the reason (strings the grammar does not generate); the
    formats ministruct does not enforce refused with their position."""
    compiled, refused, false_accepts, false_rejects = _run(stem, FORMATS)
    if stem in FORMATS_REFUSED:
        assert compiled == 0 and refused
        return
    assert compiled and not refused
    assert false_accepts == []
    cases = json.loads((FORMATS / f"{stem}.json").read_text())
    wanted = {(c, t) for (s, c, t) in FORMAT_FALSE_REJECTS if s == stem}
    for case in cases:
        if (stem, case["description"]) in FORMAT_CASES_REJECTED:
            wanted |= {(case["description"], t["description"]) for t in case["tests"] if t["valid"]}
    assert set(false_rejects) == wanted


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
