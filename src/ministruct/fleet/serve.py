"""Local llama-cpp-python servers: for tests, benchmarks and trying a fleet on one machine.

`LocalServer.start()` runs llama-cpp-python's own server,

    python -m llama_cpp.server --model M --host 127.0.0.1 --port P --n_ctx 2048

on a free port, `wait_ready()` polls /v1/models, `kill()` ends it by its pid.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_extra_missing() -> str | None:
    """Why llama-cpp-python's server cannot run here (its `server` extra is not importable), or None."""
    try:
        import llama_cpp.server.app  # noqa: F401
    except ImportError as e:
        return f"llama-cpp-python's server extra is not importable: {e}"
    return None


class LocalServer:
    """One llama-cpp-python server process on 127.0.0.1."""

    def __init__(self, process: subprocess.Popen, port: int) -> None:
        self.process = process
        self.port = port
        self.url = f"http://127.0.0.1:{port}"

    @property
    def pid(self) -> int:
        return self.process.pid

    @classmethod
    def start(
        cls,
        model: str | os.PathLike[str],
        *,
        port: int | None = None,
        n_ctx: int = 2048,
        log: IO[bytes] | int | None = subprocess.DEVNULL,
        extra_args: list[str] | None = None,
    ) -> "LocalServer":
        """Start the server (it is not ready yet: call `wait_ready`)."""
        port = port or free_port()
        cmd = [
            sys.executable,
            "-m",
            "llama_cpp.server",
            "--model",
            str(Path(model)),
            "--host",
            "127.0.0.1",
            "--port",
            str(port),
            "--n_ctx",
            str(n_ctx),
            *(extra_args or []),
        ]
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log)
        return cls(proc, port)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Poll /v1/models until it answers; RuntimeError when the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(
                    f"server on port {self.port} exited with {self.process.returncode} before it was ready"
                )
            try:
                with urllib.request.urlopen(self.url + "/v1/models", timeout=2.0) as r:
                    if r.status == 200:
                        return
            except OSError:
                pass
            time.sleep(0.25)
        raise RuntimeError(f"server on port {self.port} not ready after {timeout:g} s")

    def alive(self) -> bool:
        return self.process.poll() is None

    def kill(self) -> None:
        """End the process by its pid (SIGKILL) and reap it."""
        if self.process.poll() is None:
            os.kill(self.process.pid, signal.SIGKILL)
        self.process.wait(timeout=30)
