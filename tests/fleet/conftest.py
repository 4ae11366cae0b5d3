"""Real llama-cpp-python servers on the bundled model, and the `ministruct` command in a subprocess.

`fleet_servers` starts TWO servers (`python -m llama_cpp.server --model M --host
127.0.0.1 --port P --n_ctx 2048`) on free ports,
once per session, waits until /v1/models answers, and kills them by pid at the end.
Tests skip, saying why, only when the server extra cannot be imported.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from ministruct.fleet.serve import LocalServer, server_extra_missing

REPO = Path(__file__).resolve().parents[2]
READY_TIMEOUT = 180.0


def start_servers(n: int, log_dir: Path) -> list[LocalServer]:
    """n servers on the bundled model, each ready (or the started ones killed and an error raised)."""
    from ministruct.decode.gguf import bundled_model_path

    servers: list[LocalServer] = []
    try:
        for i in range(n):
            log = open(log_dir / f"server{len(list(log_dir.iterdir()))}.log", "wb")
            servers.append(LocalServer.start(bundled_model_path(), log=log))
        for s in servers:
            s.wait_ready(READY_TIMEOUT)
    except BaseException:
        for s in servers:
            s.kill()
        raise
    return servers


@pytest.fixture(scope="session")
def server_logs(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("server-logs")


@pytest.fixture(scope="session")
def fleet_servers(server_logs):
    """Two running llama-cpp-python servers (LocalServer: .url, .pid)."""
    reason = server_extra_missing()
    if reason:
        pytest.skip(reason)
    servers = start_servers(2, server_logs)
    yield servers
    for s in servers:
        s.kill()


@pytest.fixture
def spare_server(server_logs):
    """One more server, for a test that kills it."""
    reason = server_extra_missing()
    if reason:
        pytest.skip(reason)
    (s,) = start_servers(1, server_logs)
    yield s
    s.kill()


@pytest.fixture(scope="session")
def run_cli(tmp_path_factory):
    """run_cli(*args, input=None) -> CompletedProcess of `python -m ministruct ARGS`."""
    env = dict(os.environ)
    env["MINISTRUCT_CACHE_DIR"] = str(tmp_path_factory.mktemp("cache"))
    for k in ("MINISTRUCT_DEBUG", "MINISTRUCT_MODEL", "MINISTRUCT_SERVERS", "MINISTRUCT_API_KEY"):
        env.pop(k, None)
    env["PYTHONPATH"] = str(REPO / "src") + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")

    def run(
        *args: str, input: str = "", extra_env: dict | None = None, timeout: float = 600
    ) -> subprocess.CompletedProcess:
        return subprocess.run(
            [sys.executable, "-m", "ministruct", *args],
            input=input,
            capture_output=True,
            text=True,
            cwd=REPO,
            env={**env, **(extra_env or {})},
            timeout=timeout,
        )

    run.env = env  # type: ignore[attr-defined]
    return run


def batch(n: int, text: str = "Record {i}: pick a number from 10 to 99") -> str:
    """n JSONL input records with ids r0, r1, ..."""
    return "".join(json.dumps({"id": f"r{i}", "prompt": text.format(i=i)}) + "\n" for i in range(n))


def records(stdout: str) -> list[dict]:
    return [json.loads(line) for line in stdout.splitlines()]


def assert_usage_error(p: subprocess.CompletedProcess, *needles: str) -> None:
    """Exit 2, one `ministruct: error:` line naming the problem, nothing on stdout."""
    assert p.returncode == 2, (p.returncode, p.stderr)
    assert p.stdout == ""
    lines = p.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("ministruct: error: "), p.stderr
    for n in needles:
        assert n in lines[0], (n, lines[0])
