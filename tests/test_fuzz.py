"""Hostile input never produces a traceback or an internal error (exit 3), and each run
ends within a hang guard. Garbage grammars, regexes and schemas through the library
(`load_constraint` + `check_text` may raise only MinistructError, which the command line
turns into one line and exit 2); garbage input lines and records through the real
command-line entry point, in-process (no model needed: `check`)."""

from __future__ import annotations

import io
import json
import sys
import tempfile
from pathlib import Path

from guards import hang_guard  # tests/ is on sys.path
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from ministruct.check.grammar import check_text
from ministruct.cli.app import main
from ministruct.errors import MinistructError
from ministruct.grammar.constraint import load_constraint

WORK = Path(tempfile.mkdtemp(prefix="ministruct-fuzz-"))
FUZZ = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
FUZZ_CLI = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])


def run(*args: str, stdin: bytes = b"") -> tuple[int, str, str]:
    """`ministruct ARGS` in-process: (exit code, stdout, stderr)."""
    saved = sys.argv, sys.stdin, sys.stdout, sys.stderr
    out, err = io.StringIO(), io.StringIO()
    sys.argv = ["ministruct", *args]
    sys.stdin = io.TextIOWrapper(io.BytesIO(stdin), encoding="utf-8")
    sys.stdout, sys.stderr = out, err
    try:
        with hang_guard(30, f"ministruct {' '.join(args)[:200]}"):
            main()
        code = 0
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else 0
    finally:
        sys.argv, sys.stdin, sys.stdout, sys.stderr = saved
    return code, out.getvalue(), err.getvalue()


def assert_clean(code: int, err: str) -> None:
    assert code in (0, 1, 2), (code, err)
    assert "Traceback" not in err and "internal error" not in err, err
    if code == 2:
        assert err.startswith("ministruct: error: "), err


def library(text: str, **constraint) -> None:
    """Load and check: anything but a MinistructError (a bug) or a hang fails the test."""
    with hang_guard(20, f"load_constraint({constraint})"[:200]):
        try:
            c = load_constraint(**constraint)
            check_text(c.grammar, text)
            check_text(c.grammar, text, prefix=True)
        except MinistructError as e:
            assert str(e) and "\n" not in str(e).split("\n")[0]


def write(name: str, text: str) -> str:
    p = WORK / name
    p.write_text(text, encoding="utf-8", errors="surrogatepass")
    return str(p)


gbnf_text = st.text(alphabet='root:= |()*+?{}[]^-"\\.abc019\n#<>!', max_size=60)


@FUZZ
@given(st.one_of(gbnf_text, gbnf_text.map(lambda t: "root ::= " + t)), st.text(max_size=12))
def test_garbage_grammars(grammar, text):
    library(text, grammar=write("g.gbnf", grammar))


regex_text = st.text(alphabet="ab()|*+?{}[]^$-,.:=!<>0123456789\\dwsDWSbBAZpP", max_size=40)


@FUZZ
@given(st.one_of(regex_text, st.text(max_size=30)), st.text(max_size=12))
def test_garbage_regexes(regex, text):
    library(text, regex=regex)


keywords = st.sampled_from(
    [
        "type",
        "properties",
        "items",
        "prefixItems",
        "required",
        "enum",
        "const",
        "anyOf",
        "oneOf",
        "allOf",
        "not",
        "$ref",
        "$defs",
        "pattern",
        "minLength",
        "maxLength",
        "minimum",
        "maximum",
        "multipleOf",
        "minItems",
        "maxItems",
        "additionalProperties",
        "patternProperties",
        "format",
        "uniqueItems",
        "exclusiveMinimum",
    ]
)
json_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(-(10**12), 10**12),
    st.floats(allow_nan=False),
    st.text(max_size=8),
    st.sampled_from(["string", "integer", "object", "array", "null", "#", "#/$defs/a", "^a+$", "email"]),
)
schemas = st.recursive(
    json_leaf,
    lambda kids: st.one_of(
        st.lists(kids, max_size=3), st.dictionaries(st.one_of(keywords, st.text(max_size=4)), kids, max_size=4)
    ),
    max_leaves=25,
)


@FUZZ
@given(schemas, st.text(max_size=12))
def test_garbage_schemas(schema, text):
    path = write("s.json", json.dumps(schema))
    library(text, schema=path)
    library(text, schema=path, extra_properties="spec", whitespace="flexible", lenient=True)


@FUZZ_CLI
@given(st.binary(max_size=400))
def test_garbage_input_lines(data):
    code, out, err = run("check", "--regex", "[a-z]*", "--input", "-", stdin=data)
    assert_clean(code, err)
    assert code in (0, 1)
    lines = data.split(b"\n")
    if lines and lines[-1] == b"":
        lines.pop()
    if lines and lines[0].startswith(b"\xef\xbb\xbf"):
        lines[0] = lines[0][3:]
    expected = sum(1 for line in lines if line.decode("utf-8", "replace").strip())
    records = [json.loads(x) for x in out.splitlines()]
    assert len(records) == expected  # one result per non-blank input line, in order
    assert [r["index"] for r in records] == sorted(r["index"] for r in records)


@FUZZ_CLI
@given(
    st.lists(
        st.one_of(
            st.dictionaries(
                st.sampled_from(["id", "text", "regex", "choice", "schema", "seed", "extra"]), json_leaf, max_size=4
            ),
            st.text(max_size=20),
        ),
        max_size=8,
    )
)
def test_garbage_json_records(items):
    data = "\n".join(json.dumps(x) if isinstance(x, dict) else x.replace("\n", " ") for x in items).encode(
        "utf-8", "surrogatepass"
    )
    code, out, err = run("check", "--choice", "a", "--input", "-", stdin=data + b"\n")
    assert_clean(code, err)
    assert code in (0, 1)


def test_cli_errors_are_one_line_for_bad_constraints():
    for args in (
        ("--regex", "a{1000000}"),
        ("--regex", "(a"),
        ("--grammar", write("bad.gbnf", "root ::= (")),
        ("--schema", write("bad.json", '{"type": "string", "minLength": 1e8}'), "--as-generated"),
    ):
        code, out, err = run("check", *args, "a")
        assert_clean(code, err)
        assert code == 2 and out == "" and err.count("ministruct: error:") == 1, err


def test_deeply_nested_texts_are_rejected_cleanly():
    schema = write("arr.json", '{"type": "array"}')
    deep = "[" * 1500 + "]" * 1500  # beyond what the JSON reader nests into
    for args in (("--schema", schema), ("--schema", schema, "--as-generated")):
        code, out, err = run("check", *args, deep)
        assert_clean(code, err)
        assert code in (0, 1) and out.strip()
