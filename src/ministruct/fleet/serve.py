"""Local llama-cpp-python servers: for tests, benchmarks and trying a fleet on one machine.

`LocalServer.start()` runs `python -m ministruct.fleet.serve --model M --host 127.0.0.1
--port P --n_ctx 2048` on a free port, `wait_ready()` polls /v1/models, `kill()` ends it
by its pid. Running this module is running llama-cpp-python's server
(`python -m llama_cpp.server`) with llama.cpp's extra weight buffers off:

    python -m ministruct.fleet.serve --model M --host 127.0.0.1 --port P --n_ctx 2048

takes exactly the arguments of `python -m llama_cpp.server`. The one difference: the
model is loaded with `use_extra_bufts = False`, so llama.cpp never moves weights into
its repacked/AMX buffers. A llama-cpp-python built natively (llama.cpp's default
`GGML_NATIVE=ON`) on a virtual machine that advertises AMX without enabling it dies
there on the first batch (SIGILL at `ldtilecfg`, or a segfault); with plain buffers it
runs. The portable build of the README and CI does not need this; it costs nothing there.
"""

from __future__ import annotations

import os
import runpy
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import IO


def _plain_buffers() -> None:
    import llama_cpp.llama_cpp as lib

    default = lib.llama_model_default_params
    if getattr(default, "_ministruct_plain", False):
        return

    def params():  # type: ignore[no-untyped-def]
        p = default()
        p.use_extra_bufts = False
        return p

    params._ministruct_plain = True  # type: ignore[attr-defined]
    lib.llama_model_default_params = params


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
            sys.executable, "-m", "ministruct.fleet.serve", "--model", str(Path(model)),
            "--host", "127.0.0.1", "--port", str(port), "--n_ctx", str(n_ctx), *(extra_args or []),
        ]
        env = dict(os.environ)
        src = str(Path(__file__).resolve().parents[2])  # this ministruct, even when not installed
        env["PYTHONPATH"] = src + (os.pathsep + env["PYTHONPATH"] if env.get("PYTHONPATH") else "")
        proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=log, stderr=log, env=env)
        return cls(proc, port)

    def wait_ready(self, timeout: float = 120.0) -> None:
        """Poll /v1/models until it answers; RuntimeError when the process ends or time runs out."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"server on port {self.port} exited with {self.process.returncode} before it was ready")
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


if __name__ == "__main__":
    _plain_buffers()
    runpy.run_module("llama_cpp.server", run_name="__main__", alter_sys=True)
