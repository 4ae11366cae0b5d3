"""The IRI format parsers are deferred until an IRI is checked, and the verdicts are
still jsonschema's own: each side runs in a fresh process, as a user's command does."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

FORMATS = (
    Path(__file__).resolve().parents[3] / ".." / "shared" / "suites" / "jsts" / "draft2020-12" / "optional" / "format"
)
IRI_SUITES = ("iri.json", "iri-reference.json")

pytest.importorskip("rfc3987_syntax")

# Prints one verdict per suite test: jsonschema alone, never through ministruct.
PLAIN = """
import json, sys
from jsonschema import Draft202012Validator, FormatChecker
out = []
for group in json.load(sys.stdin):
    v = Draft202012Validator(group["schema"], format_checker=FormatChecker())
    out.append([v.is_valid(t["data"]) for t in group["tests"]])
print(json.dumps(out))
"""

# The same through check --schema's checker, saying whether the parsers were built.
OURS = """
import json, sys
from ministruct.check.instance import InstanceChecker
groups = json.load(sys.stdin)
InstanceChecker({"type": "string", "minLength": 1}).check('"x"')
before = type(sys.modules["rfc3987_syntax"]).__name__
out = []
for group in groups:
    c = InstanceChecker(group["schema"])
    out.append([c.check_value(t["data"]).accepted for t in group["tests"]])
print(json.dumps({"before": before, "after": type(sys.modules["rfc3987_syntax"]).__name__, "verdicts": out}))
"""


def _run(code: str, groups: list) -> object:
    done = subprocess.run(
        [sys.executable, "-c", code], input=json.dumps(groups), capture_output=True, text=True, check=True
    )
    return json.loads(done.stdout)


@pytest.mark.skipif(not FORMATS.is_dir(), reason="../shared/suites/jsts is not present")
def test_iri_verdicts_are_jsonschemas_and_parsers_wait_for_the_first_iri():
    groups = [g for name in IRI_SUITES for g in json.loads((FORMATS / name).read_text())]
    ours = _run(OURS, groups)
    assert ours["before"] == "_Deferred"  # a schema without an IRI format built no parser
    assert ours["after"] == "module"  # the real package answered the IRI checks
    assert ours["verdicts"] == _run(PLAIN, groups)
    flat = [v for g in ours["verdicts"] for v in g]
    assert True in flat and False in flat  # the format is asserted, not passed through


def test_the_stand_in_hands_other_attributes_to_the_real_package():
    code = (
        "import sys, ministruct.grammar.schema, jsonschema\n"
        "m = sys.modules['rfc3987_syntax']\n"
        "print(type(m).__name__, callable(m.parse), type(sys.modules['rfc3987_syntax']).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.split()
    assert out == ["_Deferred", "True", "module"]
