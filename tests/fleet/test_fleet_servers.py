"""The fleet against real llama-cpp-python servers on the bundled model (see conftest)."""

from __future__ import annotations

import json
import re
import signal
import socket
import subprocess
import sys
import threading
import time

import pytest

from fleet.conftest import REPO, assert_usage_error, batch, records
from fleet.gate import Gate, gates
from ministruct.decode.sampling import SamplingParams
from ministruct.fleet import FleetBatch, Server, Settings, connect
from ministruct.fleet.serve import free_port
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.records import InputRecord

pytestmark = pytest.mark.model

TWO_DIGITS = ("--regex", "[0-9]{2}", "--max-tokens", "4")
RAW = "Record {i}. A number:"  # short raw prompts keep the server's prompt evaluation small
WORDS = "Record {i}: describe the sea in one sentence."  # answered in words when nothing constrains it


def servers_args(servers) -> list[str]:
    return [a for s in servers for a in ("--server", s.url)]


def two_digit_batch(run_cli, servers, text: str, *flags: str, kind: str = "llama"):
    """`gen --input -` with TWO_DIGITS on `servers` of `kind`, the records in `text`."""
    return run_cli(
        "gen", "--input", "-", *TWO_DIGITS, *flags, "--server-kind", kind, *servers_args(servers), input=text
    )


def test_sixty_records_split_over_two_servers_in_order_all_verified(fleet_servers, run_cli):
    p = two_digit_batch(run_cli, fleet_servers, batch(60, RAW), "--raw")
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == [f"r{i}" for i in range(60)]
    assert all(r["verified"] is True and r["complete"] is True for r in recs), [r for r in recs if not r["verified"]]
    assert all(re.fullmatch(r"[0-9]{2}", r["output"]) for r in recs)
    assert {r["server"] for r in recs} == {s.url for s in fleet_servers}  # both took a share
    assert all(r["v"] == 1 and r["error"] is None and r["prompt"] == RAW.format(i=i) for i, r in enumerate(recs))


def test_a_bad_record_is_reported_in_its_place_and_the_batch_goes_on(fleet_servers, run_cli):
    """As in a local batch (cli.md): the bad line becomes an error record, the others are
    generated, and the exit status is 1 (a failed record), not 2."""
    lines = batch(3, RAW).splitlines()
    lines.insert(1, "{not json")
    p = two_digit_batch(run_cli, fleet_servers, "\n".join(lines) + "\n", "--raw")
    assert p.returncode == 1, p.stderr
    recs = records(p.stdout)
    assert len(recs) == 4 and recs[1]["error"].startswith("<stdin>:2: not valid JSON"), recs[1]
    assert [r["verified"] for i, r in enumerate(recs) if i != 1] == [True, True, True]


def test_a_server_killed_mid_batch_loses_and_duplicates_nothing(fleet_servers, spare_server):
    """The spare answers 5 requests and dies when its 6th arrives; the other server holds
    every request after its 3rd until then, so the records left go to the spare and one of
    them meets the dead server, at any speed."""
    c = load_constraint(regex="[0-9]{2}")
    settings = Settings(SamplingParams(temperature=0.7, top_p=0.9), max_tokens=4, chat=False)
    killed = threading.Event()

    def kill_spare() -> None:
        spare_server.kill()
        killed.set()

    spare = Gate(spare_server.url, [0], 5, threading.Event(), threading.Lock(), on_hold=kill_spare)
    other = Gate(fleet_servers[0].url, [0], 3, killed, threading.Lock())
    try:
        servers = connect([spare.url, other.url], c, settings, kind="llama")
        got: list = []
        recs = [InputRecord(i + 1, f"r{i}", RAW.format(i=i)) for i in range(60)]
        status = FleetBatch(servers, c, settings).run(recs, got.append)
    finally:
        killed.set()
        spare.close()
        other.close()
    assert status == 0
    assert [r.result.id for r in got] == [f"r{i}" for i in range(60)]
    assert all(r.verified for r in got)
    assert sum(r.server == spare.url for r in got) == 5
    assert sum(r.server == other.url for r in got) == 55
    assert not spare_server.alive()
    # the kill was seen, and what was in flight on the spare ran again on the other server:
    # every record once, in order, verified
    assert servers[0].faults >= 1 and servers[0].last_error


def test_the_dialect_the_server_ignores_is_caught_on_the_first_record(fleet_servers, run_cli):
    p = two_digit_batch(run_cli, fleet_servers, batch(4, WORDS), kind="vllm")
    assert p.returncode == 1, p.stderr
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == ["r0", "r1", "r2", "r3"]
    answered = [r for r in recs if r["server"] is not None]
    assert 1 <= len(answered) <= 2  # a server that ignored the constraint gets no more records (issue 29)
    for r in answered:
        assert r["verified"] is False and r["complete"] is False and r["stop_reason"] == "max_tokens"
        assert r["check_error"].startswith(f"line 1, column {r['check_position']['column']} ")
        assert r["check_expected"]
    for r in recs[len(answered) :]:
        assert "no server left" in r["error"] and "it ignored the constraint" in r["error"]
    notices = [line for line in p.stderr.splitlines() if "ignored the constraint" in line]
    assert 1 <= len(notices) <= 2  # one line per server that answered, never one per record
    for s in fleet_servers:
        assert sum(s.url in line for line in notices) <= 1
    assert all("kind vllm sends field structured_outputs; try --server-kind llama" in line for line in notices)


def test_retry_unverified_resends_and_counts(fleet_servers, run_cli):
    p = two_digit_batch(run_cli, fleet_servers[:1], batch(1, WORDS), "--retry-unverified", "1", kind="vllm")
    assert p.returncode == 1
    assert [(r["resent"], r["verified"]) for r in records(p.stdout)] == [(1, False)]


def test_a_schema_is_verified_as_an_instance(fleet_servers, run_cli, tmp_path):
    schema = tmp_path / "s.json"
    schema.write_text(
        json.dumps(
            {
                "type": "object",
                "properties": {"n": {"type": "integer", "minimum": 0, "maximum": 9}},
                "required": ["n"],
                "additionalProperties": False,
            }
        )
    )
    p = run_cli(
        "gen",
        "--input",
        "-",
        "--schema",
        str(schema),
        "--max-tokens",
        "12",
        "--server-kind",
        "llama",
        *servers_args(fleet_servers),
        input=batch(3, "Record {i}: give n"),
    )
    assert p.returncode == 0, p.stderr
    recs = records(p.stdout)
    assert all(r["verified"] and isinstance(r["json"]["n"], int) for r in recs)


def test_unreachable_server_gets_no_records_and_dead_fleet_gives_error_records(fleet_servers, run_cli):
    dead = f"http://127.0.0.1:{free_port()}"
    p = run_cli(
        "gen",
        "--input",
        "-",
        *TWO_DIGITS,
        "--server-kind",
        "llama",
        "--server",
        dead,
        "--server",
        fleet_servers[1].url,
        "--concurrency",
        "2",
        input=batch(3),
    )
    assert p.returncode == 0, p.stderr
    assert [r["server"] for r in records(p.stdout)] == [fleet_servers[1].url] * 3
    assert f"server {dead}: not reachable" in p.stderr

    p = run_cli("gen", "--input", "-", *TWO_DIGITS, "--server-kind", "llama", "--server", dead, input=batch(3))
    assert p.returncode == 1
    recs = records(p.stdout)
    assert [r["id"] for r in recs] == ["r0", "r1", "r2"]
    assert all(r["stop_reason"] is None and "no server left" in r["error"] and r["verified"] is False for r in recs)


def test_kind_cannot_be_detected_on_llama_cpp_python(fleet_servers, run_cli):
    p = run_cli("gen", "--regex", "[0-9]{2}", "hi", "--server", fleet_servers[0].url)
    assert_usage_error(p, "--server-kind is not given and server", "does not say what it is")


def test_servers_from_the_environment_and_text_output(fleet_servers, run_cli):
    env = {"MINISTRUCT_SERVERS": f"{fleet_servers[0].url}, {fleet_servers[1].url}/v1"}
    p = run_cli(
        "gen",
        "--choice",
        "yes",
        "--choice",
        "no",
        "--server-kind",
        "llama",
        "--max-tokens",
        "3",
        "Say yes or no:",
        extra_env=env,
    )
    assert p.returncode == 0, p.stderr
    assert p.stdout in ("yes\n", "no\n")


def test_trace_has_chosen_probability_and_a_lower_bound_on_z(fleet_servers, run_cli, tmp_path):
    trace = tmp_path / "t.jsonl"
    p = run_cli(
        "gen",
        "--input",
        "-",
        *TWO_DIGITS,
        "--server-kind",
        "llama",
        "--raw",
        "--trace",
        str(trace),
        "--server",
        fleet_servers[0].url,
        input=batch(2, "Record {i}. Number:"),
    )
    assert p.returncode == 0, p.stderr
    recs = [json.loads(x) for x in trace.read_text().splitlines()]
    assert [r["type"] for r in recs if r["type"] != "step"] == ["header", "summary", "header", "summary"]
    steps = [r for r in recs if r["type"] == "step"]
    assert len(steps) >= 4 and all(r["logprobs_available"] for r in recs if r["type"] == "summary")
    for s in steps:
        # the chosen token is legal (the server enforced the grammar) and among the returned tokens
        assert 0.0 < s["p"] <= s["Z_lower"] + 1e-9 and s["Z_lower"] <= 1.0 + 1e-6
        assert s["legal_top"] >= 1 and re.fullmatch(r"[0-9]+", s["token"])


def test_ctrl_c_writes_every_finished_record_and_exits_130(fleet_servers, run_cli):
    # the servers sit behind gates that pass 6 requests and hold the rest until the signal
    # has been sent: the batch stops short of its end at any speed
    gated, released = gates([s.url for s in fleet_servers], open_for=6)
    args = [sys.executable, "-m", "ministruct", "gen", "--input", "-", *TWO_DIGITS, "--raw", "--server-kind", "llama"]
    args += [a for g in gated for a in ("--server", g.url)]
    proc = subprocess.Popen(
        args,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=REPO,
        env=run_cli.env,
    )
    try:
        proc.stdin.write(batch(40, RAW))
        proc.stdin.close()
        first = "".join(proc.stdout.readline() for _ in range(3))  # the batch is under way
        proc.send_signal(signal.SIGINT)
        time.sleep(0.5)  # (the signal is handled before the held requests go on: a wait, not a verdict)
        released.set()
        proc.wait(timeout=120)
    finally:
        released.set()
        for g in gated:
            g.close()
    rest, err = proc.stdout.read(), proc.stderr.read()
    assert proc.returncode == 130, err
    recs = records(first + rest)
    ids = [r["id"] for r in recs]
    assert ids[:3] == ["r0", "r1", "r2"] and len(ids) == len(set(ids)) < 40
    assert ids == sorted(ids, key=lambda x: int(x[1:]))
    assert all(r["verified"] for r in recs)
    assert "Traceback" not in err


def test_a_server_that_never_answers_times_out_and_its_records_go_elsewhere(fleet_servers):
    hung = socket.socket()
    hung.bind(("127.0.0.1", 0))
    hung.listen(16)  # connections are accepted by the kernel; no answer ever comes
    try:
        c = load_constraint(regex="[0-9]{2}")
        settings = Settings(SamplingParams(temperature=0.7, top_p=0.9), max_tokens=4, chat=False)
        silent = Server(f"http://127.0.0.1:{hung.getsockname()[1]}", "llama", timeout=1.0)
        servers = [silent, Server(fleet_servers[0].url, "llama")]  # the batch's timeout: 300 s
        got = []
        status = FleetBatch(servers, c, settings).run(
            [InputRecord(i + 1, f"r{i}", RAW.format(i=i)) for i in range(6)], got.append
        )
    finally:
        hung.close()
    assert status == 0
    assert [r.result.id for r in got] == [f"r{i}" for i in range(6)]
    assert all(r.verified and r.server == fleet_servers[0].url for r in got)
    assert silent.faults >= 1 and silent.last_error == "no answer within 1 s"


def test_records_carry_their_own_constraint_and_settings_to_the_servers(fleet_servers, run_cli, tmp_path):
    """Issue 28: a record's schema/regex/choice, max_tokens, seed, temperature go with it;
    a record whose own constraint cannot load is an error record in its place."""
    yn = tmp_path / "yn.json"
    yn.write_text(json.dumps({"enum": ["yes", "no"]}))
    rows = [
        {"id": "plain", "prompt": RAW.format(i=0)},
        {"id": "letters", "prompt": RAW.format(i=1), "regex": "[a-z]{3}", "max_tokens": 6, "seed": 7},
        {"id": "yn", "prompt": RAW.format(i=2), "schema": str(yn), "temperature": 0.2},
        {"id": "bad", "prompt": RAW.format(i=3), "schema": "/nonexistent/x.json"},
        {"id": "pick", "prompt": RAW.format(i=4), "choice": ["red", "green"], "top_p": 0.5},
    ]
    p = two_digit_batch(run_cli, fleet_servers, "".join(json.dumps(r) + "\n" for r in rows), "--raw")
    assert p.returncode == 1, p.stderr
    recs = {r["id"]: r for r in records(p.stdout)}
    assert list(recs) == [r["id"] for r in rows]
    assert re.fullmatch(r"[0-9]{2}", recs["plain"]["output"]) and recs["plain"]["verified"] is True
    assert re.fullmatch(r"[a-z]{3}", recs["letters"]["output"]) and recs["letters"]["verified"] is True
    assert recs["yn"]["output"] in ('"yes"', '"no"') and recs["yn"]["json"] in ("yes", "no")
    assert recs["bad"]["error"].startswith("<stdin>:4: ") and "no such schema file" in recs["bad"]["error"]
    assert recs["pick"]["output"] in ("red", "green") and recs["pick"]["verified"] is True
