"""Running the real `ministruct` command in a subprocess, as users and scripts do."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any, Callable

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="session")
def cli_env(tmp_path_factory) -> dict:
    env = dict(os.environ)
    env["MINISTRUCT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    env.pop("MINISTRUCT_DEBUG", None)
    env.pop("MINISTRUCT_MODEL", None)
    env["COLUMNS"] = "100"
    return env


@pytest.fixture(scope="session")
def run_cli(cli_env):
    """run_cli(*args, input=None) -> CompletedProcess (text mode, cwd = repo root)."""

    def run(*args: str, input: str | None = None, env: dict | None = None) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ministruct", *args],
            input=input if input is not None else "",
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**cli_env, **(env or {})},
            timeout=600,
        )

    return run


def run_to_full_disk(cli_env: dict, *args: str, input: str = "") -> subprocess.CompletedProcess:
    """`ministruct *args` with stdout on a full disk (/dev/full); stderr captured as text."""
    with open("/dev/full", "w") as full:
        return subprocess.run(
            [sys.executable, "-m", "ministruct", *args],
            input=input,
            stdout=full,
            stderr=subprocess.PIPE,
            text=True,
            cwd=REPO,
            env=cli_env,
            timeout=300,
        )


def assert_one_line_error(proc: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, nothing on stdout, one `ministruct: error:` line naming the problem, no traceback."""
    assert proc.returncode == 2, (proc.returncode, proc.stderr)
    assert proc.stdout == ""
    lines = proc.stderr.strip().splitlines()
    assert len(lines) == 1, proc.stderr
    assert lines[0].startswith("ministruct: error: ")
    assert "Traceback" not in proc.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])


def gen_valid_outputs(run_cli: Callable, schema_path: Path, validator: Any, *flags: str) -> list[Any]:
    """`gen --schema` three times (seed 3, one prompt): each record complete, without an
    error, its output valid by `validator` (a jsonschema validator); the values."""
    p = run_cli(
        "gen", "--schema", str(schema_path), *flags, "Give one example as JSON:", "--n", "3", "--seed", "3",
        "--format", "jsonl",
    )  # fmt: skip
    assert p.returncode == 0, p.stderr
    records = [json.loads(line) for line in p.stdout.splitlines()]
    assert len(records) == 3
    values = []
    for rec in records:
        assert rec["complete"] and rec["error"] is None, rec
        value = json.loads(rec["output"])
        assert validator.is_valid(value), (schema_path.name, rec["output"])
        values.append(value)
    return values
