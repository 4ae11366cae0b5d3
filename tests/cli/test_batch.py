"""`gen --input` / `check --input` as shell pipelines see them (issue 15): every line
accounted for, per-record settings honoured, signals, --resume, closed and full outputs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from guards import hang_guard  # tests/ is on sys.path

from cli.conftest import REPO, assert_one_line_error, run_to_full_disk

LONG = "word " * 2500  # more tokens than the bundled model's context (2048)
ASK = "Answer:"  # every runnable record has this prompt: its prefill is evaluated once and reused
RAW = ("--raw", "--withhold-schema", "--quiet")  # short prompts, the same for every constraint


def _lines(text: str) -> list[dict]:
    return [json.loads(x) for x in text.splitlines()]


def _mixed(tmp_path: Path) -> tuple[Path, list[bytes]]:
    yn = tmp_path / "yn.json"
    yn.write_text(json.dumps({"enum": ["yes", "no"]}))
    rows: list[bytes] = []
    for i in range(200):
        kind = i % 10
        rid = f"r{i}"
        rec: dict | None = None
        if kind == 0:
            if i % 20 == 0:
                rows.append(ASK.encode())
                continue
            rec = {"id": rid, "prompt": ASK, "choice": ["maybe", "perhaps"]}
        elif kind == 1:
            rows.append(b'{"id": "' + rid.encode() + b'", "prompt": "broken json"')
            continue
        elif kind == 2:
            rec = {"id": rid, "prompt": "p", "schema": f"/nonexistent/s{i}.json"}
        elif kind == 3:
            rec = {"id": rid, "prompt": "p", "colour": "red"}
        elif kind == 4:
            rec = {"id": rid, "prompt": ""}
        elif kind == 5:
            rec = {"id": rid, "prompt": LONG}
        elif kind == 6:
            rec = {"id": rid, "prompt": ASK, "schema": str(yn), "max_tokens": 8}
        elif kind == 7:
            rec = {
                "id": rid,
                "prompt": ASK,
                "regex": "[a-z]{3}",
                "seed": (i // 10) % 2,
                "temperature": 1.0,
                "max_tokens": 6,
            }
        elif kind == 8:
            rec = {"id": rid, "prompt": ASK, "regex": "[a-z]{1,40}", "max_tokens": 2}
        else:
            rows.append(b"not \xff utf-8 " + rid.encode())
            continue
        rows.append(json.dumps(rec).encode())
    path = tmp_path / "mixed.jsonl"
    path.write_bytes(b"\n".join(rows) + b"\n")
    return path, rows


@pytest.mark.model
def test_two_hundred_mixed_records(run_cli, tmp_path):
    path, rows = _mixed(tmp_path)
    p = run_cli("gen", "--choice", "yes", "--choice", "no", "--input", str(path), "--max-tokens", "16", *RAW)
    assert p.returncode == 1, p.stderr
    recs = _lines(p.stdout)
    assert len(recs) == 200
    ids = [r["id"] for r in recs]
    assert ids == [i + 1 if i % 20 == 0 or i % 10 == 9 else (f"r{i}" if i % 10 != 1 else i + 1) for i in range(200)]
    by_kind: dict[int, list[dict]] = {}
    for i, r in enumerate(recs):
        by_kind.setdefault(i % 10, []).append(r)
        assert r["v"] == 1 and r["stop_reason"] in (None, "eos", "grammar_done", "max_tokens", "no_legal_continuation")
        if r["error"] is not None:
            assert r["stop_reason"] is None and r["output"] == "" and r["n_tokens"] == 0
            assert r["error"].startswith(f"{path}:{i + 1}: "), r["error"]
    for r in by_kind[0]:
        assert r["error"] is None and r["output"] in (
            ("yes", "no") if isinstance(r["id"], int) else ("maybe", "perhaps")
        )
    assert all("not valid JSON" in r["error"] and r["prompt"] is None for r in by_kind[1])
    assert all(
        "/nonexistent/s" in r["error"] and "no such schema file" in r["error"] and r["prompt"] == "p"
        for r in by_kind[2]
    )
    assert all('unknown field "colour"' in r["error"] and "colour" not in r for r in by_kind[3])
    assert all(r["error"].endswith("the prompt is empty") and r["prompt"] == "" for r in by_kind[4])
    assert all("exceed the context size" in r["error"] and r["prompt"] == LONG for r in by_kind[5])
    for r in by_kind[6]:  # the record's schema, not the command's choice
        assert r["error"] is None and r["output"] in ('"yes"', '"no"') and r["json"] in ("yes", "no")
    seeds = {}
    for r in by_kind[7]:  # the record's regex, seed and temperature
        assert r["error"] is None and len(r["output"]) == 3 and r["output"].isalpha()
        seeds.setdefault(r["id"], r["output"])
    for k, r in enumerate(by_kind[7]):
        assert r["output"] == by_kind[7][k % 2]["output"]  # same seed, same output
    for r in by_kind[8]:  # the record's max_tokens (the command says 16)
        assert r["error"] is None and r["n_tokens"] <= 2
    assert all("not UTF-8" in r["error"] for r in by_kind[9])
    assert "200 results: " in p.stderr and "120 failed" in p.stderr and "Traceback" not in p.stderr
    one = run_cli("gen", "--regex", "[a-z]{3}", ASK, "--seed", "1", "--temperature", "1.0", "--max-tokens", "6", *RAW)
    assert one.stdout.strip() == by_kind[7][1]["output"]  # the record's seed 1 is the command's --seed 1


def _big(tmp_path: Path, n: int = 40) -> Path:
    path = tmp_path / "big.jsonl"
    path.write_text("".join(json.dumps({"id": i, "prompt": ASK}) + "\n" for i in range(1, n + 1)))
    return path


def _popen(cli_env: dict, *args: str) -> subprocess.Popen:
    return subprocess.Popen(
        [sys.executable, "-m", "ministruct", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=cli_env,
    )


@pytest.mark.model
def test_head_one_ends_quietly(cli_env, tmp_path):
    # finding 6: `| head -1` exited 1
    p = _popen(cli_env, "gen", "--choice", "yes", "--choice", "no", "--input", str(_big(tmp_path)), *RAW)
    first = p.stdout.readline()
    p.stdout.close()  # what `head -1` does after its line
    err = p.stderr.read()
    assert p.wait(timeout=300) == 0, err
    assert json.loads(first)["id"] == 1
    assert err == "", err  # no traceback, no "Exception ignored", no summary


@pytest.mark.model
@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_signal_then_resume_completes_without_duplicates(cli_env, run_cli, tmp_path, signum, code):
    # the first run reads the batch from a pipe that holds 20 of its 40 records when the
    # signal comes (more than --parallel's 16 live generations), so it stops short of the
    # end at any speed
    big = _big(tmp_path)
    flags = ("gen", "--choice", "yes", "--choice", "no", *RAW)
    args = (*flags, "--input", str(big))
    p = subprocess.Popen(
        [sys.executable, "-m", "ministruct", *flags, "--input", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=cli_env,
    )
    p.stdin.write("".join(big.read_text().splitlines(keepends=True)[:20]))
    p.stdin.flush()
    got = [p.stdout.readline() for _ in range(3)]
    p.send_signal(signum)
    with hang_guard(300, "the batch to stop after the signal", waiting=True):
        rest = p.stdout.read()  # through the same buffer as readline: batched records come in bursts
        err = p.stderr.read()
    assert p.wait(timeout=300) == code, err
    p.stdin.close()
    assert "Traceback" not in err and f"stopped by {signal.Signals(signum).name}" in err
    assert rest == "" or rest.endswith("\n")  # the last line is whole
    first = _lines("".join(got) + rest)
    assert 3 <= len(first) <= 20 and [r["id"] for r in first] == list(range(1, len(first) + 1))
    out = tmp_path / "out.jsonl"
    out.write_text("".join(got) + rest)
    again = run_cli(*args, "--resume", str(out))
    assert again.returncode == 0, again.stderr
    second = _lines(again.stdout)
    assert [r["id"] for r in first + second] == list(range(1, 41))  # all of them, once each, in order
    assert f"{len(first)} skipped" in again.stderr


@pytest.mark.model
def test_non_utf8_on_stdin_is_one_error_record(run_cli):
    # finding 3: on stdin it ended in "internal error: UnicodeEncodeError", exit 3
    data = f"{ASK}\nbad \udcff byte\n{ASK}\n"
    p = subprocess.run(
        [sys.executable, "-m", "ministruct", "gen", "--choice", "yes", "--choice", "no", "--input", "-", *RAW],
        input=data.encode("utf-8", "surrogateescape"),
        capture_output=True,
        cwd=REPO,
        env={k: v for k, v in os.environ.items() if k != "MINISTRUCT_DEBUG"},
        timeout=300,
    )
    recs = _lines(p.stdout.decode())
    assert [r["id"] for r in recs] == [1, 2, 3] and p.returncode == 1
    assert recs[1]["error"] == "<stdin>:2: not UTF-8 text (byte 5 of the line is 0xff)"
    assert recs[0]["output"] in ("yes", "no") and recs[2]["output"] in ("yes", "no")


@pytest.mark.model
@pytest.mark.parametrize(
    "args, needle",
    [
        ((), "ministruct: error: <stdout>: cannot write: No space left on device"),
        (
            ("--trace", "/dev/full"),
            "ministruct: error: /dev/full: cannot write the trace file: No space left on device",
        ),
    ],
)
def test_full_disk_names_the_output(cli_env, args, needle):
    # finding 5: `> /dev/full` and `--trace /dev/full` were internal errors (exit 3)
    p = run_to_full_disk(cli_env, "gen", "--choice", "yes", ASK, *RAW, *args)
    assert p.returncode == 2 and p.stderr.strip() == needle, p.stderr


def test_check_batch_extra_fields_and_resume(run_cli, tmp_path):
    lines = [
        json.dumps({"id": "a", "text": "yes", "row": 7}),
        json.dumps({"id": "b", "text": "no", "regex": "n."}),
        json.dumps({"id": "c", "text": "x", "tag": None}),
    ]
    inp = tmp_path / "in.jsonl"
    inp.write_text("\n".join(lines) + "\n")
    strict = run_cli("check", "--choice", "yes", "--input", str(inp))
    assert strict.returncode == 1
    assert [(r["accepted"], r["error"] is None) for r in _lines(strict.stdout)] == [
        (None, False),
        (True, True),
        (None, False),
    ]
    loose = run_cli("check", "--choice", "yes", "--input", str(inp), "--allow-extra-fields")
    recs = _lines(loose.stdout)
    assert [(r["id"], r["accepted"]) for r in recs] == [("a", True), ("b", True), ("c", False)]
    assert recs[0]["row"] == 7 and recs[2]["tag"] is None and "row" not in recs[1]
    assert loose.stderr.strip() == "ministruct: 3 results: 2 accepted, 1 rejected, 0 failed"
    out = tmp_path / "out.jsonl"
    out.write_text(loose.stdout.splitlines()[0] + "\n")
    rest = run_cli("check", "--choice", "yes", "--input", str(inp), "--allow-extra-fields", "--resume", str(out))
    assert [r["id"] for r in _lines(rest.stdout)] == ["b", "c"]


def test_resume_and_extra_fields_need_input(run_cli):
    assert_one_line_error(run_cli("check", "--choice", "a", "a", "--resume", "x.jsonl"), "--resume")


def test_check_input_bad_constraint_in_a_record_names_the_line(run_cli, tmp_path):
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        json.dumps({"text": "a", "regex": "a{1000000}"}) + "\n" + json.dumps({"text": "a", "regex": "a"}) + "\n"
    )
    p = run_cli("check", "--choice", "a", "--input", str(inp))
    recs = _lines(p.stdout)
    assert recs[0]["error"].startswith(f"{inp}:1: <regex>: rule 'root': repetition") and recs[1]["accepted"] is True
    assert p.returncode == 1


def test_stdin_is_streamed_and_each_result_flushed(cli_env):
    # finding 6: --input was read whole; a pipeline sees each result as soon as its line is in
    p = subprocess.Popen(
        [sys.executable, "-m", "ministruct", "check", "--choice", "yes", "--input", "-"],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=cli_env,
    )
    try:
        for i, text in enumerate(["yes", "no", "yes"], start=1):
            p.stdin.write(json.dumps({"id": i, "text": text}) + "\n")
            p.stdin.flush()
            with hang_guard(120, "the result of a line while stdin stays open"):
                rec = json.loads(p.stdout.readline())
            assert (rec["id"], rec["accepted"]) == (i, text == "yes")
        p.stdin.close()
        assert p.wait(timeout=120) == 1
    finally:
        p.kill()


def test_a_record_naming_stdin_is_an_error_record_and_the_rest_still_run(run_cli):
    # with --input -, a record's "schema": "-" read the rest of stdin as its schema: records 2 and 3 were lost
    data = '{"text": "1", "schema": "-"}\n{"text": "2"}\n{"text": "3"}\n'
    p = run_cli("check", "--input", "-", "--regex", "[0-9]", input=data)
    recs = _lines(p.stdout)
    assert [r["id"] for r in recs] == [1, 2, 3] and p.returncode == 1
    assert recs[0]["error"] == '<stdin>:1: "schema": "-" (stdin) is for the command line; a record names a file'
    assert [r["accepted"] for r in recs[1:]] == [True, True]


@pytest.mark.parametrize("command", ["check", "gen", "collapse"])
@pytest.mark.parametrize("flag", ["--schema", "--lark", "--tools"])
def test_input_and_a_constraint_cannot_both_read_stdin(run_cli, command, flag):
    # the constraint read the records as its text: "<stdin>: not valid JSON", or a Lark syntax error
    p = run_cli(command, "--input", "-", flag, "-", input="5\n")
    assert_one_line_error(p, f"--input and {flag} both read stdin")


@pytest.mark.model
def test_gen_reads_every_record_of_a_pipe_given_by_name(run_cli):
    # gen --input /dev/stdin (or <(...), a FIFO): the progress total's line count read the records away
    p = run_cli("gen", "--input", "/dev/stdin", "--choice", "yes", "--choice", "no", *RAW, input=f"{ASK}\n{ASK}\n")
    assert [r["id"] for r in _lines(p.stdout)] == [1, 2] and p.returncode == 0, p.stderr


@pytest.mark.model
def test_duplicate_ids_then_resume_lose_no_record(run_cli, tmp_path):
    # issue 52: `gen --input in.jsonl | head -1 > out.jsonl; gen --input in.jsonl --resume
    # out.jsonl` generated nothing: both records had the id "a"
    inp = tmp_path / "in.jsonl"
    inp.write_text(
        '{"id":"a","prompt":"Pick a year"}\n{"id":"a","prompt":"Pick another"}\n"plain, line 3"\n{"id":3,"prompt":"x"}\n'
    )
    args = ("gen", "--regex", "[0-9]{4}", "--input", str(inp), "--quiet", "--no-progress")
    whole = run_cli(*args)
    recs = _lines(whole.stdout)
    assert [(r["id"], r["error"]) for r in recs] == [
        ("a", None),
        ("a", f'{inp}:2: id "a" is already the id of line 1; ids must be unique'),
        (3, None),
        (3, f"{inp}:4: id 3 is already the id of line 3; ids must be unique"),
    ]
    assert whole.returncode == 1
    out = tmp_path / "out.jsonl"
    out.write_text(whole.stdout.splitlines(keepends=True)[0])  # `| head -1 > out.jsonl`
    again = run_cli(*args, "--resume", str(out))
    assert [r["error"] for r in _lines(again.stdout)] == [r["error"] for r in recs[1:]]
    assert "1 skipped (already in the --resume file)" in again.stderr
