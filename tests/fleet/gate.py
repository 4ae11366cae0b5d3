"""A gate in front of a real server, for tests whose verdict must not depend on speed: it
passes the first `open_for` completion requests (of all gates sharing its counter) and
holds every later one until `release()`: a signal sent before the release comes while
records are still to do, whatever the machine's speed. With `on_hold`, a request past
`open_for` calls it instead of waiting (and is then passed on: to a server it killed, say)."""

from __future__ import annotations

import socket
import threading
from typing import Callable
from urllib.parse import urlparse


class Gate:
    def __init__(
        self,
        target_url: str,
        counter: list[int],
        open_for: int,
        released: threading.Event,
        lock: threading.Lock,
        on_hold: Callable[[], None] | None = None,
    ) -> None:
        u = urlparse(target_url)
        self.target = (u.hostname, u.port)
        self.counter, self.open_for, self.released = counter, open_for, released
        self.lock, self.on_hold = lock, on_hold
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(32)
        self.url = f"http://127.0.0.1:{self.sock.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.sock.accept()
            except OSError:
                return
            try:
                server = socket.create_connection(self.target)
            except OSError:  # the server behind is gone: the client sees the connection close
                client.close()
                continue
            threading.Thread(target=self._pump, args=(client, server, True), daemon=True).start()
            threading.Thread(target=self._pump, args=(server, client, False), daemon=True).start()

    def _pump(self, src: socket.socket, dst: socket.socket, requests: bool) -> None:
        try:
            while True:
                data = src.recv(65536)
                if not data:
                    break
                if requests and b"POST " in data:
                    with self.lock:
                        self.counter[0] += data.count(b"POST ")
                        held = self.counter[0] > self.open_for
                    if held and self.on_hold is not None:
                        self.on_hold()
                    elif held:
                        self.released.wait()
                dst.sendall(data)
        except OSError:
            pass
        finally:
            for s in (src, dst):
                try:
                    s.shutdown(socket.SHUT_RDWR)
                except OSError:
                    pass

    def close(self) -> None:
        self.sock.close()


def gates(urls: list[str], open_for: int) -> tuple[list[Gate], threading.Event]:
    """One gate per server, `open_for` requests through them all before they hold."""
    counter, released, lock = [0], threading.Event(), threading.Lock()
    return [Gate(u, counter, open_for, released, lock) for u in urls], released
