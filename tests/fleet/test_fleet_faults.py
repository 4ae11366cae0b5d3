"""The fleet's signals, --resume and faults (issue 29), against real llama-cpp-python
servers (see conftest) and, for the faults a real server does not make on demand, plain
sockets that hang, then drop the connection."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import threading
import time
from pathlib import Path

import pytest

from fleet.conftest import REPO, batch, records
from fleet.gate import gates
from ministruct.decode.sampling import SamplingParams
from ministruct.fleet import FleetBatch, Server, Settings
from ministruct.fleet.client import Connection, ServerFault
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.records import InputRecord

pytestmark = pytest.mark.model

TWO_DIGITS = ("--regex", "[0-9]{2}", "--max-tokens", "4", "--raw", "--server-kind", "llama")
RAW = "Record {i}. A number:"
N = 120  # (a first request slow on one server held 35 finished records back: all 40 were out before the signal)


def _servers(fleet_servers) -> list[str]:
    return [a for s in fleet_servers for a in ("--server", s.url)]


@pytest.mark.parametrize("signum, code", [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_mid_batch_then_resume_gives_every_record_once(fleet_servers, run_cli, tmp_path: Path, signum, code):
    # SIGTERM killed the process at once (records held behind the one in flight were lost);
    # after SIGINT the records in flight had no result line; --resume was refused with --server
    # (the first run's servers sit behind gates that pass 8 requests and hold the rest
    # until the signal has been sent: it stops short of the end at any speed)
    inp = tmp_path / "in.jsonl"
    inp.write_text(batch(N, RAW))
    out = tmp_path / "out.jsonl"
    base = [sys.executable, "-m", "ministruct", "gen", "--input", str(inp), *TWO_DIGITS, "--concurrency", "2"]
    args = [*base, *_servers(fleet_servers)]
    gated, released = gates([s.url for s in fleet_servers], open_for=8)
    first_args = [*base, *[a for g in gated for a in ("--server", g.url)]]
    try:
        with open(out, "w") as f:
            proc = subprocess.Popen(first_args, stdout=f, stderr=subprocess.PIPE, text=True, cwd=REPO, env=run_cli.env)
            deadline = time.monotonic() + 300
            while out.read_text().count("\n") < 5 and time.monotonic() < deadline:  # under way
                time.sleep(0.05)
            proc.send_signal(signum)
            time.sleep(0.5)  # (before the held requests go on, the signal is handled)
            released.set()
            err = proc.communicate(timeout=300)[1]
    finally:
        released.set()
        for g in gated:
            g.close()
    assert proc.returncode == code, err
    first = records(out.read_text())
    assert 5 <= len(first) < N, len(first)
    assert "Traceback" not in err and f"stopped by {signal.Signals(signum).name}" in err
    assert f"{len(first)} results: {len(first)} verified, 0 unverified, 0 failed" in err
    with open(out, "a") as f:  # `--resume out.jsonl >> out.jsonl`
        again = subprocess.run(
            [*args, "--resume", str(out)], stdout=f, stderr=subprocess.PIPE, text=True, cwd=REPO, env=run_cli.env
        )
    assert again.returncode == 0, again.stderr
    assert f"{len(first)} skipped (already in the --resume file)" in again.stderr
    every = records(out.read_text())
    ids = [r["id"] for r in every]
    assert sorted(ids, key=lambda x: int(x[1:])) == [f"r{i}" for i in range(N)]  # each once, none lost
    assert all(r["verified"] for r in every)


def test_the_summary_line_counts_results_and_each_servers_share(fleet_servers, run_cli):
    p = run_cli("gen", "--input", "-", *TWO_DIGITS, *_servers(fleet_servers), input=batch(6, RAW))
    assert p.returncode == 0, p.stderr
    line = p.stderr.strip().splitlines()[-1]
    assert line.startswith("ministruct: 6 results: 6 verified, 0 unverified, 0 failed; answered by ")
    shares = dict(part.rsplit(" ", 1) for part in line.split("answered by ")[1].split(", "))
    assert sum(int(k) for k in shares.values()) == 6 and set(shares) <= {s.url for s in fleet_servers}


def test_a_server_that_ignores_the_constraint_gets_no_more_records(fleet_servers):
    # being the fastest, the ignoring server took 16 of 20 records
    c = load_constraint(regex="[0-9]{2}")
    settings = Settings(SamplingParams(temperature=0.7, top_p=0.9), max_tokens=4, chat=False)
    ignoring = Server(fleet_servers[0].url, "vllm")  # llama-cpp-python drops `structured_outputs`
    honest = Server(fleet_servers[1].url, "llama")
    said: list[str] = []
    got = []
    status = FleetBatch([ignoring, honest], c, settings, warn=said.append, on_ignored=lambda e: None).run(
        [InputRecord(i + 1, f"r{i}", f"Describe the sea. Record {i}:") for i in range(12)], got.append
    )
    assert [r.result.id for r in got] == [f"r{i}" for i in range(12)]
    on_ignoring = [r for r in got if r.server == ignoring.url]
    assert len(on_ignoring) <= 1 and ignoring.dead and ignoring.last_error == "it ignored the constraint"
    assert all(r.verified for r in got if r.server == honest.url)
    assert status == (1 if on_ignoring and not on_ignoring[0].verified else 0)


class _HangThenDrop:
    """A TCP server that answers GET /v1/models, and reads each other request, waits `hang`
    seconds and closes the connection without an answer."""

    MODELS = (
        b'HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 26\r\n\r\n{"data": [{"id": "fake"}]}'
    )

    def __init__(self, hang: float) -> None:
        self.hang, self.accepted = hang, 0
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(8)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._serve, daemon=True).start()

    def _serve(self) -> None:
        while True:
            try:
                conn, _ = self.sock.accept()
            except OSError:
                return
            self.accepted += 1
            threading.Thread(target=self._one, args=(conn,), daemon=True).start()

    def _one(self, conn: socket.socket) -> None:
        with conn:
            while conn.recv(65536).startswith(b"GET /v1/models"):
                conn.sendall(self.MODELS)
            time.sleep(self.hang)

    def close(self) -> None:
        self.sock.close()


def test_a_server_that_hangs_then_drops_is_one_fault_not_two():
    # a drop after a long wait was resent at once as if the connection were a stale
    # keep-alive one: a server that hangs 30 s then closes cost 60 s per fault
    srv = _HangThenDrop(hang=1.5)
    try:
        conn = Connection(srv.url, timeout=30)
        assert conn.request("GET", "/v1/models") == {"data": [{"id": "fake"}]}  # now kept alive
        with pytest.raises(ServerFault, match="connection closed by the server"):
            conn.request("POST", "/v1/completions", {"prompt": "x"})
        assert srv.accepted == 1  # the drop was not resent
    finally:
        srv.close()


def test_the_request_timeout_is_a_flag_and_a_given_up_server_is_said(run_cli):
    srv = _HangThenDrop(hang=600)
    try:
        p = run_cli("gen", "--input", "-", *TWO_DIGITS, "--server", srv.url, "--timeout", "0.5", input=batch(2, RAW))
    finally:
        srv.close()
    assert p.returncode == 1, p.stderr
    assert all("no answer within 0.5 s" in r["error"] for r in records(p.stdout))
    assert f"server {srv.url}: given up after 3 faults in a row (last: no answer within 0.5 s)" in p.stderr
    assert p.stderr.strip().splitlines()[-1].endswith(f"2 failed; given up: {srv.url}")


def test_a_fleet_trace_on_a_full_disk_is_one_error_line(fleet_servers, run_cli):
    p = run_cli(
        "gen", "--input", "-", *TWO_DIGITS, *_servers(fleet_servers), "--trace", "/dev/full", input=batch(2, RAW)
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == "ministruct: error: /dev/full: cannot write the trace file: No space left on device"
