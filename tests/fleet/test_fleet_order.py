"""After a signal the fleet writes the finished records up to the first unfinished one
only (issue 52's probe: a record put back after a server was killed was still unfinished
when SIGINT came; the records after it were written, among them a duplicate id's error
line, and --resume then took that line as the earlier record's result and skipped it)."""

from __future__ import annotations

import os
import queue
import signal

from ministruct.decode.sampling import SamplingParams
from ministruct.fleet import FleetBatch, Settings
from ministruct.fleet.run import FleetResult
from ministruct.grammar.constraint import load_constraint
from ministruct.jobs.job import GenResult
from ministruct.jobs.records import InputRecord


def test_a_signal_writes_the_finished_prefix_only(monkeypatch):
    batch = FleetBatch([], load_constraint(regex="[0-9]{2}"), Settings(SamplingParams(), max_tokens=4, chat=False))
    records = [InputRecord(i + 1, f"r{i}", "x") for i in range(5)]
    monkeypatch.setattr(batch, "_start_workers", lambda: [])
    for idx in (1, 2, 4):  # finished; r0 (put back after a fault) and r3 are not
        batch._results.put((idx, FleetResult(GenResult(f"r{idx}", "x", "12", True, "eos", 2), "s", None)))
    real_get, signalled = batch._results.get, []

    def get(block=True, timeout=None):
        if not signalled and block:
            signalled.append(True)
            os.kill(os.getpid(), signal.SIGINT)  # arrives while r0 is still unfinished
            raise queue.Empty
        return real_get(block, timeout)

    monkeypatch.setattr(batch._results, "get", get)
    written = []
    assert batch.run(records, lambda r: written.append(r.result.id)) == 130
    assert written == []  # (r1, r2 and r4 run again on --resume, after r0)


def test_after_a_signal_what_is_written_is_in_input_order(monkeypatch):
    batch = FleetBatch([], load_constraint(regex="[0-9]{2}"), Settings(SamplingParams(), max_tokens=4, chat=False))
    records = [InputRecord(i + 1, f"r{i}", "x") for i in range(5)]
    monkeypatch.setattr(batch, "_start_workers", lambda: [])
    for idx in (2, 0, 1, 4):
        batch._results.put((idx, FleetResult(GenResult(f"r{idx}", "x", "12", True, "eos", 2), "s", None)))
    real_get, calls = batch._results.get, []

    def get(block=True, timeout=None):
        calls.append(1)
        if len(calls) == 5 and block:
            os.kill(os.getpid(), signal.SIGINT)
            raise queue.Empty
        return real_get(block, timeout)

    monkeypatch.setattr(batch._results, "get", get)
    written = []
    assert batch.run(records, lambda r: written.append(r.result.id)) == 130
    assert written == ["r0", "r1", "r2"]
