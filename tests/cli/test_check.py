"""`ministruct check` and `ministruct convert` (no model needed)."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from cli.conftest import REPO, assert_one_line_error


def test_check_accepts_and_rejects_with_place(run_cli):
    ok = run_cli("check", "--regex", "[0-9]{4}", "1984")
    assert ok.returncode == 0 and ok.stdout.strip() == "ok"
    bad = run_cli("check", "--regex", "[0-9]{4}", "19a4")
    assert bad.returncode == 1
    assert bad.stdout.strip() == "rejected at line 1, column 3 (byte 2): unexpected 'a'; expected [0-9]"
    short = run_cli("check", "--regex", "[0-9]{4}", "198")
    assert short.returncode == 1
    assert short.stdout.strip() == "rejected at line 1, column 4 (byte 3): end of text; expected [0-9]"


def test_check_prefix(run_cli):
    assert run_cli("check", "--prefix", "--regex", "[0-9]{4}", "198").returncode == 0
    assert run_cli("check", "--prefix", "--regex", "[0-9]{4}", "19845").returncode == 1


def test_check_multiline_position_counts_characters(run_cli):
    p = run_cli("check", "--choice", "ab\ncdé!", "ab\ncdéx")
    assert p.returncode == 1
    assert "line 2, column 4 (byte 7): unexpected 'x'; expected '!'" in p.stdout


def test_check_jsonl_batch_in_order_with_bad_records(run_cli):
    lines = [json.dumps({"id": "x", "text": "yes"}), json.dumps({"id": "y", "text": 5}), "no", "maybe"]
    p = run_cli("check", "--choice", "yes", "--choice", "no", "--input", "-", input="\n".join(lines) + "\n")
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [(r["v"], r["index"], r["id"], r["accepted"]) for r in recs] == [
        (1, 1, "x", True),
        (1, 2, "y", None),
        (1, 3, 3, True),
        (1, 4, 4, False),
    ]
    assert recs[0]["error"] is None and "text" in recs[1]["error"] and "line 1, column 1" in recs[3]["error"]
    assert set(recs[0]) == {"v", "index", "id", "accepted", "error"}
    assert p.returncode == 1  # a failed record fails the batch (cli.md); it still ran


def test_check_input_file_missing(run_cli):
    assert_one_line_error(run_cli("check", "--choice", "a", "--input", "/no/such/file.jsonl"), "/no/such/file.jsonl")


@pytest.mark.parametrize(
    "args, needle",
    [
        ((), "give a constraint"),
        (("--choice", "a", "--regex", "a"), "exactly one constraint"),
        (("--choice", "a", "--root", "x"), "--root"),
    ],
)
def test_usage_errors(run_cli, args, needle):
    assert_one_line_error(run_cli("check", *args, "a"), needle)


def test_convert_choice_to_gbnf(run_cli):
    p = run_cli("convert", "--choice", "yes", "--choice", 'say "no"', "--to", "gbnf")
    assert p.returncode == 0
    assert p.stdout == 'root ::= "yes" | "say \\"no\\""\n'


@pytest.mark.parametrize("to", ["gbnf", "lark", "regex"])
def test_convert_refuses_a_constraint_that_matches_nothing_as_check_does(run_cli, to):
    """An empty language is an error wherever the constraint is used, not a grammar printed
    for another engine to fail on."""
    assert_one_line_error(run_cli("convert", "--regex", r"[^\s\S]", "--to", to), "matches no string")
    assert_one_line_error(run_cli("check", "--regex", r"[^\s\S]", "x"), "matches no string")


def test_bundled_grammar_by_name_and_unknown_name(run_cli):
    assert run_cli("check", "--grammar", "digits", "2024").returncode == 0
    assert run_cli("check", "--grammar", "digits", "20a4").returncode == 1
    assert_one_line_error(run_cli("check", "--grammar", "nosuch", "1"), "nosuch", "bundled: arithmetic, digits, json")


def test_the_quick_exit_loses_no_output(run_cli, cli_env, tmp_path):
    """The process ends without tearing the interpreter down (cli/app.end_process): every
    record still reaches stdout, a file or a pipe, in full and with the batch's status."""
    lines = [json.dumps({"id": i, "text": "yes" if i % 3 else "maybe"}) for i in range(3000)]
    p = run_cli("check", "--choice", "yes", "--input", "-", input="\n".join(lines) + "\n")
    recs = [json.loads(x) for x in p.stdout.splitlines()]
    assert [r["id"] for r in recs] == list(range(3000)) and len(p.stdout) > 100_000
    assert [r["accepted"] for r in recs] == [bool(i % 3) for i in range(3000)] and p.returncode == 1
    source = tmp_path / "in.jsonl"
    source.write_text("\n".join(lines) + "\n")
    target = tmp_path / "out.jsonl"
    with target.open("w") as out:  # stdout a file: block-buffered to the end
        done = subprocess.run(
            [sys.executable, "-m", "ministruct", "check", "--choice", "yes", "--input", str(source)],
            stdout=out,
            stderr=subprocess.PIPE,
            cwd=REPO,
            env=cli_env,
            timeout=300,
        )
    assert done.returncode == 1 and target.read_text() == p.stdout


def test_main_called_in_process_raises_system_exit(monkeypatch, capsys):
    """Only the process entry point (run_command_line) ends the process at once: main()
    inside a process that goes on (a test, an embedding program) exits by SystemExit."""
    from ministruct.cli.app import main

    monkeypatch.setattr(sys, "argv", ["ministruct", "check", "--regex", "[0-9]+", "42"])
    with pytest.raises(SystemExit) as e:
        main()
    assert e.value.code == 0 and capsys.readouterr().out == "ok\n"


@pytest.mark.parametrize(
    "regex, text, expected",
    [
        ("é+", "x", "'é'"),
        ("[^a]+", "a", "any character but 'a'"),
        ("[^a-z]", "a", "any character but [a-z]"),
        ("[α-ω]+", "a", "[α-ω]"),
        ("(x|é|中)", "a", "[xé中]"),
        (".", "", "any character but '\\n'"),
        ("'", "a", '"\'"'),
        (r"\w", "!", "[0-9A-Z_a-z] or a non-ASCII character"),
    ],
)
def test_what_was_expected_is_said_in_characters_not_byte_classes(run_cli, regex, text, expected):
    # issue 52: `[^a]` said "expected [\x00-`b-\x7f] or a non-ASCII character", `é` "a non-ASCII character"
    p = run_cli("check", "--regex", regex, text)
    assert p.returncode == 1 and p.stdout.strip().endswith(f"; expected {expected}"), p.stdout


def test_schema_documents_give_remote_refs_to_both_checks(run_cli, tmp_path):
    """--schema-documents URI=PATH: the grammar (--as-generated) and the validator find the
    remote document there; without it the schema is refused naming the flag (exit 2)."""
    (tmp_path / "count.json").write_text(json.dumps({"type": "integer", "minimum": 1}))
    schema = tmp_path / "s.json"
    schema.write_text(json.dumps({"type": "array", "items": {"$ref": "https://example.com/count.json"}}))
    docs = ["--schema-documents", f"https://example.com/={tmp_path}"]
    for mode in ([], ["--as-generated"]):
        assert run_cli("check", "--schema", str(schema), *docs, *mode, "[1, 2]").returncode == 0
        assert run_cli("check", "--schema", str(schema), *docs, *mode, "[0]").returncode == 1
    bad = run_cli("check", "--schema", str(schema), "--as-generated", "[1]")
    assert bad.returncode == 2 and "--schema-documents" in bad.stderr
