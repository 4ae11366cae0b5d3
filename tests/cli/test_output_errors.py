"""An output that cannot be written is one error line naming it, exit 2, on every command
(issue 29): stdout on a full disk (`> /dev/full`), a trace file on a full disk."""

from __future__ import annotations

import subprocess
import sys

import pytest

from cli.conftest import REPO, run_to_full_disk

STDOUT_FULL = "ministruct: error: <stdout>: cannot write: No space left on device"
TRACE_FULL = "ministruct: error: /dev/full: cannot write the trace file: No space left on device"


@pytest.mark.parametrize(
    "args",
    [
        ("--help",),
        ("--version",),
        ("gen", "--help"),
        ("check", "--help"),
        ("convert", "--regex", "[0-9]{3}"),
        ("convert", "--schema", "-", "--to", "regex"),
        ("check", "--regex", "[0-9]", "7"),
    ],
    ids=lambda a: " ".join(a),
)
def test_stdout_on_a_full_disk_is_one_error_line(cli_env, args):
    p = run_to_full_disk(cli_env, *args, input='{"type": "integer"}')
    assert (p.returncode, p.stderr.strip()) == (2, STDOUT_FULL)


@pytest.mark.model
@pytest.mark.parametrize(
    "args",
    [
        ("inspect", "--regex", "[0-9]"),
        ("inspect", "--regex", "[0-9]", "--max-tokens", "2", "Digit:"),
        ("bench", "--regex", "[0-9]{4}", "--steps", "3", "--no-generate"),
    ],
    ids=lambda a: " ".join(a),
)
def test_model_commands_with_stdout_on_a_full_disk(cli_env, args):
    p = run_to_full_disk(cli_env, *args, "--no-progress") if args[0] == "inspect" else run_to_full_disk(cli_env, *args)
    assert (p.returncode, p.stderr.strip()) == (2, STDOUT_FULL)


@pytest.mark.model
def test_a_trace_on_a_full_disk_in_a_batch_stops_it_with_one_error_line(cli_env, tmp_path):
    # the record where the disk filled was an error record, later traces were dropped, exit 1
    inp = "\n".join(f'{{"id": {i}, "prompt": "Answer:"}}' for i in range(3)) + "\n"
    p = subprocess.run(
        [sys.executable, "-m", "ministruct", "gen", "--choice", "yes", "--input", "-", "--raw", "--quiet"]
        + ["--no-progress", "--trace", "/dev/full"],
        input=inp,
        capture_output=True,
        text=True,
        cwd=REPO,
        env=cli_env,
        timeout=300,
    )
    assert p.returncode == 2, p.stderr
    assert p.stderr.strip() == TRACE_FULL
    assert '"error": null' in p.stdout or p.stdout == ""  # no record turned into an error record
    assert "/dev/full" not in p.stdout
