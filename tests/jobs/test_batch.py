"""The batch machinery without a model: per-record settings, the content-keyed constraint
cache, counts and exit status, --resume, and SIGINT/SIGTERM between records."""

from __future__ import annotations

import io
import json
import os
import signal
import time
from dataclasses import dataclass
from typing import Any

import pytest
from guards import hang_guard  # tests/ is on sys.path
from hypothesis import given, settings
from hypothesis import strategies as st

from ministruct.check.grammar import check_text
from ministruct.errors import MinistructError
from ministruct.jobs.batch import (
    CHECK_LABELS,
    CHECK_SETTINGS,
    GEN_SETTINGS,
    ConstraintCache,
    Resume,
    Tally,
    record_constraint,
    run_batch,
    settings_error,
    validated,
    with_constraint,
)
from ministruct.jobs.records import read_records


@pytest.mark.parametrize(
    "settings, error",
    [
        ({"seed": 3, "max_tokens": 4, "temperature": 0, "top_p": 1, "system": None, "regex": "a"}, None),
        ({"schema": "a.json", "regex": "a"}, "give at most one constraint per record, not schema and regex"),
        ({"seed": "3"}, '"seed" must be an integer >= 0, not "3"'),
        ({"seed": True}, '"seed" must be an integer >= 0, not true'),
        ({"max_tokens": 0}, '"max_tokens" must be an integer >= 1, not 0'),
        ({"temperature": -1}, '"temperature" must be a number >= 0, not -1'),
        ({"top_p": 0}, '"top_p" must be a number in (0, 1], not 0'),
        ({"choice": []}, '"choice" must be a non-empty array of strings'),
        ({"choice": ["a", 1]}, '"choice" must be a non-empty array of strings'),
        ({"schema": {"type": "string"}}, '"schema" must be a string, not an object'),
        ({"system": 5}, '"system" must be a string, not a number'),
        ({"schema": "-"}, '"schema": "-" (stdin) is for the command line; a record names a file'),
        ({"lark": "-"}, '"lark": "-" (stdin) is for the command line; a record names a file'),
        ({"tools": "-"}, '"tools": "-" (stdin) is for the command line; a record names a file'),
    ],
)
def test_settings_are_validated(settings, error):
    assert settings_error(settings) == error


def test_validated_marks_the_record_with_its_place():
    (rec,) = validated(read_records([b'{"prompt": "p", "seed": -1}\n'], "prompt", "in.jsonl", settings=GEN_SETTINGS))
    assert rec.error == 'in.jsonl:1: "seed" must be an integer >= 0, not -1'


def test_ten_thousand_records_over_three_schemas_load_three_times(tmp_path):
    paths = []
    for i, t in enumerate(("string", "integer", "boolean")):
        p = tmp_path / f"s{i}.json"
        p.write_text(json.dumps({"type": t}))
        paths.append(str(p))
    texts = {0: '"x"', 1: "7", 2: "true"}
    lines = [
        json.dumps({"id": i, "text": texts[i % 3], "schema": paths[i % 3]}).encode() + b"\n" for i in range(10_000)
    ]
    cache = ConstraintCache.of_options({"regex": "unused", "whitespace": "compact", "lenient": False})
    seen = []

    def process(rec, done):
        c = cache.get(*record_constraint(rec.settings))
        seen.append(check_text(c.grammar, rec.value).accepted)
        yield "accepted" if seen[-1] else "rejected"

    status = run_batch(validated(read_records(lines, "text", settings=CHECK_SETTINGS)), process, labels=CHECK_LABELS)
    assert status == 0 and len(seen) == 10_000 and all(seen)
    assert cache.loads == 3


def test_cache_keys_on_content_and_remembers_failures(tmp_path):
    p = tmp_path / "s.json"
    p.write_text('{"type": "integer"}')
    calls = []

    def load(kind, value):
        calls.append((kind, value))
        if value == "bad":
            raise MinistructError("bad: refused")
        return object()

    cache = ConstraintCache(load)
    a = cache.get("schema", str(p))
    assert cache.get("schema", str(p)) is a
    p.write_text('{"type": "string"}')  # the same path with new content is a new constraint
    assert cache.get("schema", str(p)) is not a
    for _ in range(3):
        with pytest.raises(MinistructError, match="bad: refused"):
            cache.get("regex", "bad")
    assert cache.get("choice", ["x", "y"]) is cache.get("choice", ["x", "y"])
    assert len(calls) == 4 and cache.loads == 4


def test_with_constraint_keeps_the_other_options():
    @dataclass
    class Flags:
        regex: object = None
        grammar: object = "g.gbnf"
        schema: object = None
        choice: object = None
        lark: object = None
        root: object = "start"
        whitespace: str = "pretty"
        lenient: bool = True

    f = with_constraint(Flags(), "schema", "s.json")
    assert (f.schema, f.grammar, f.root, f.whitespace, f.lenient) == ("s.json", None, None, "pretty", True)
    g = with_constraint(Flags(), "grammar", "h.gbnf")
    assert (g.grammar, g.root) == ("h.gbnf", "start")


def test_tally_line_and_exit_status():
    t = Tally()
    assert t.exit_code() == 0 and t.line() == "0 results: 0 ok, 0 incomplete, 0 failed"
    t.add("ok")
    assert t.exit_code() == 0
    t.add("incomplete")
    assert t.exit_code() == 1
    t.skipped = 2
    assert t.line() == "2 results: 1 ok, 1 incomplete, 0 failed; 2 skipped (already in the --resume file)"
    with pytest.raises(ValueError):
        t.add("error")


def test_resume_reads_ids_and_ignores_torn_lines(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_bytes(b'{"v": 1, "id": "a"}\n{"v": 1, "id": 2}\n{"v": 1, "id": 2}\nnot json\n{"v": 1, "id": "c", "outp')
    r = Resume.load(str(out))
    assert (r.take("a", 5), r.take(2, 5), r.take("2", 5), r.take("c", 5)) == (1, 2, 0, 0)
    assert Resume.load(str(tmp_path / "missing.jsonl")).done == {}


def _plain(n: int) -> list[bytes]:
    return [f"line {i}\n".encode() for i in range(1, n + 1)]


def test_run_batch_skips_what_resume_found_and_runs_the_rest(tmp_path):
    out = tmp_path / "out.jsonl"
    out.write_text("".join(json.dumps({"id": i}) + "\n" for i in (1, 2, 4)))
    ran, lines = [], []

    def process(rec, done):
        ran.append(rec.id)
        yield "ok"

    status = run_batch(read_records(_plain(5), "prompt"), process, resume=Resume.load(str(out)), report=lines.append)
    assert status == 0 and ran == [3, 5]
    assert lines == ["2 results: 2 ok, 0 incomplete, 0 failed; 3 skipped (already in the --resume file)"]


def test_run_batch_with_n_results_per_record_resumes_mid_record():
    calls = []

    def process(rec, done):
        for k in range(done, 3):
            calls.append((rec.id, k))
            yield "ok"

    resume = Resume()
    resume.done.update({json.dumps(1): 3, json.dumps(2): 1})
    assert run_batch(read_records(_plain(2), "prompt"), process, resume=resume, per_record=3) == 0
    assert calls == [(2, 1), (2, 2)]


def test_any_failure_or_incomplete_result_exits_1():
    statuses = iter(["ok", "failed", "ok"])
    assert run_batch(read_records(_plain(3), "prompt"), lambda rec, done: [next(statuses)]) == 1


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_finishes_the_record_in_flight_then_stops(signum, code):
    """...and the process's own handlers are back afterwards (whatever they were: a job
    started in the background has SIGINT ignored, and keeps it so)."""
    before = {s: signal.getsignal(s) for s in (signal.SIGINT, signal.SIGTERM)}
    done, lines = [], []

    def process(rec, already):
        if rec.id == 3:
            os.kill(os.getpid(), signum)  # arrives while record 3 is in flight
        done.append(rec.id)
        yield "ok"

    status = run_batch(read_records(_plain(10), "prompt"), process, report=lines.append)
    assert status == code and done == [1, 2, 3]
    assert lines == [f"3 results: 3 ok, 0 incomplete, 0 failed; stopped by {signal.Signals(signum).name}"]
    assert {s: signal.getsignal(s) for s in before} == before


def test_a_second_signal_abandons_the_record_in_flight():
    done = []

    def process(rec, already):
        if rec.id == 2:
            os.kill(os.getpid(), signal.SIGTERM)
            os.kill(os.getpid(), signal.SIGTERM)
            done.append("never")  # the second signal interrupts before this
        done.append(rec.id)
        yield "ok"

    assert run_batch(read_records(_plain(5), "prompt"), process) == 143
    assert done == [1]


@pytest.mark.parametrize("signum, code", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_while_waiting_for_the_next_line_stops_at_once(signum, code):
    # `check --input -` at a terminal: Ctrl-C did nothing until another line (or EOF) came
    done, lines = [], []

    def slow_input():
        yield from _plain(2)
        os.kill(os.getpid(), signum)  # the reader waits for line 3 when the signal comes
        time.sleep(60)
        yield b"line 3\n"

    def process(rec, already):
        done.append(rec.id)
        yield "ok"

    with hang_guard(30, "the batch after a signal while it waited for input", waiting=True):
        status = run_batch(read_records(slow_input(), "prompt"), process, report=lines.append)
    assert status == code and done == [1, 2]
    assert lines == [f"2 results: 2 ok, 0 incomplete, 0 failed; stopped by {signal.Signals(signum).name}"]


def test_error_records_flow_through_in_order():
    data = io.BytesIO(b'{"id": "a", "prompt": "x"}\n{"broken\nplain\n')
    seen = []

    def process(rec, done):
        seen.append((rec.id, rec.error is None))
        yield "ok" if rec.error is None else "failed"

    assert run_batch(read_records(data, "prompt"), process) == 1
    assert seen == [("a", True), (2, False), (3, True)]


def _run(lines: list[bytes], written: list[Any] = (), per_record: int = 1) -> list[tuple]:
    """(id, line, sample) of what a run over `lines` writes, with the ids `written` already
    in OUT (--resume). Like gen: `per_record` samples, one error line for a record in error."""
    resume = Resume()
    for rid in written:
        resume.done[json.dumps(rid)] += 1
    ran = []

    def process(rec, done):
        for k in range(done, 1 if rec.error else per_record):
            ran.append((rec.id, rec.index, k))
            yield "ok" if rec.error is None else "failed"

    run_batch(read_records(lines, "prompt"), process, resume=resume, per_record=per_record)
    return ran


def test_resume_never_skips_a_record_whose_results_are_not_written():
    # issue 52: `gen --input in.jsonl | head -1 > out.jsonl; gen --input in.jsonl --resume
    # out.jsonl` generated nothing: the second "a" (an error record now) was skipped
    lines = [b'{"id": "a", "prompt": "Pick a year"}\n', b'{"id": "a", "prompt": "Pick another"}\n']
    assert _run(lines, ["a"]) == [("a", 2, 0)]
    assert _run(lines, ["a", "a"]) == []
    clash = [b'{"id": 2, "prompt": "x"}\n', b"plain, line 2\n", b"plain, line 3\n"]
    assert _run(clash, [2]) == [(2, 2, 0), (3, 3, 0)]
    assert _run(lines, ["a"], per_record=2) == [("a", 1, 1), ("a", 2, 0)]


@settings(max_examples=150)
@given(
    ids=st.lists(st.sampled_from(["a", "b", 1, 2, 3, None]), min_size=1, max_size=8),
    per_record=st.integers(1, 3),
    cut=st.integers(0, 30),
)
def test_a_run_cut_anywhere_then_resumed_writes_each_line_once_in_order(ids, per_record, cut):
    """Whatever the ids (duplicates, ids equal to line numbers), what a run wrote before
    it was cut plus what the resumed run writes is the uninterrupted run, line by line."""
    lines = [json.dumps({"prompt": "p"} if rid is None else {"id": rid, "prompt": "p"}).encode() + b"\n" for rid in ids]
    whole = _run(lines, per_record=per_record)
    head = whole[:cut]
    assert head + _run(lines, [rid for rid, _, _ in head], per_record) == whole


@pytest.mark.parametrize("head", [0, 1, 70_000])
def test_resume_drops_a_cut_line_when_stdout_appends_to_out(tmp_path, head):
    out = tmp_path / "out.jsonl"
    whole = "".join(json.dumps({"id": i, "pad": "x" * 50}) + "\n" for i in range(head // 60))
    out.write_text(whole + '{"id": 99, "outp')
    r = Resume.load(str(out))
    assert r.cut_off == len(whole.encode())
    with open(out, "a") as f:  # `>> out.jsonl`
        r.drop_cut_line(f)
        f.write('{"id": 99}\n')
    assert out.read_text() == whole + '{"id": 99}\n'
    assert Resume.load(str(out)).cut_off is None
