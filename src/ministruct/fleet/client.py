"""HTTP to one inference server: JSON requests, what counts as a fault, kind detection,
and the server's health (consecutive faults, exponential backoff, dead).

Standard library only (`http.client`); one connection per worker thread, reopened after
any error. A *fault* (`ServerFault`) is the server's problem: refused or reset connection,
timeout, a 5xx or 429 answer, a 200 that is not JSON. The record goes elsewhere. A 4xx
answer (`RequestRejected`) is the request's problem: the record fails with the
server's message, on any server it would be the same.
"""

from __future__ import annotations

import http.client
import json
import threading
import time
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from ministruct.errors import UsageError

PROBE_TIMEOUT = 5.0
STALE_WINDOW = 1.0  # seconds: a kept-alive connection the server had closed fails within this


class ServerFault(Exception):
    """The server could not answer (connection, timeout, 5xx, garbage): try another."""


class RequestRejected(Exception):
    """The server refused the request itself (4xx): the record fails, the server is fine."""


def normalize_url(url: str) -> str:
    """`http://host:port` without a trailing slash or `/v1`; UsageError for what is not an http(s) URL."""
    u = url.strip().rstrip("/")
    if u.endswith("/v1"):
        u = u[:-3]
    parts = urlsplit(u)
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise UsageError(f"server {url!r} is not an http:// or https:// URL", parameter="server")
    return u


def split_servers(values: list[str] | str) -> list[str]:
    """Server URLs from repeated values and/or comma- or space-separated lists, normalized, first seen kept."""
    items = [values] if isinstance(values, str) else list(values)
    out: list[str] = []
    for v in items:
        for part in v.replace(",", " ").split():
            u = normalize_url(part)
            if u not in out:
                out.append(u)
    return out


@dataclass
class Server:
    """One server of the fleet and its health, shared by its worker threads."""

    url: str
    kind: str | None = None
    model: str | None = None
    timeout: float | None = None  # seconds per request for this server (None: the batch's)
    max_faults: int = 3  # consecutive faults before the server is given up
    backoff: float = 0.25  # seconds after the first fault; doubles per further fault
    max_backoff: float = 8.0
    faults: int = 0
    dead: bool = False
    last_error: str | None = None
    ready_at: float = 0.0
    _lock: threading.Lock = field(default_factory=threading.Lock, repr=False)

    def fault(self, message: str) -> bool:
        """Count a fault: back off exponentially, give the server up after `max_faults` in a
        row. True when this fault gave it up."""
        with self._lock:
            self.faults += 1
            self.last_error = message
            self.ready_at = time.monotonic() + min(self.max_backoff, self.backoff * 2 ** (self.faults - 1))
            if self.faults >= self.max_faults and not self.dead:
                self.dead = True
                return True
            return False

    def give_up(self, why: str) -> None:
        """No more records go to this server."""
        with self._lock:
            self.dead, self.last_error = True, why

    def ok(self) -> None:
        with self._lock:
            self.faults = 0

    def wait_ready(self, stop: threading.Event) -> None:
        """Sleep out the current backoff (returns early when `stop` is set)."""
        delay = self.ready_at - time.monotonic()
        if delay > 0:
            stop.wait(delay)


class Connection:
    """A keep-alive connection to one server, for one thread."""

    def __init__(self, url: str, timeout: float, headers: dict[str, str] | None = None) -> None:
        self.url = url
        parts = urlsplit(url)
        self._https = parts.scheme == "https"
        self._host = parts.hostname or ""
        self._port = parts.port
        self._base = parts.path
        self.timeout = timeout
        self.headers = {"Content-Type": "application/json", "Accept": "application/json", **(headers or {})}
        self._conn: http.client.HTTPConnection | None = None

    def close(self) -> None:
        if self._conn is not None:
            self._conn.close()
            self._conn = None

    def request(self, method: str, path: str, body: dict | None = None) -> object:
        """The parsed JSON answer; ServerFault or RequestRejected otherwise."""
        data = None if body is None else json.dumps(body).encode("utf-8")
        try:
            reused, sent = self._conn is not None, time.monotonic()
            try:
                status, raw = self._send(method, path, data)
            except (ConnectionResetError, BrokenPipeError, http.client.RemoteDisconnected):
                self.close()
                if not reused or time.monotonic() - sent > STALE_WINDOW:
                    raise  # the server took the request, then dropped it: a fault, not a stale connection
                # a kept-alive connection the server closed while idle fails at once: one fresh try
                status, raw = self._send(method, path, data)
        except TimeoutError:
            self.close()
            raise ServerFault(f"no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as e:
            self.close()
            raise ServerFault(_describe(e)) from None
        if status >= 500 or status == 429:
            self.close()
            raise ServerFault(f"HTTP {status}: {_detail(raw)}")
        if status >= 400:
            raise RequestRejected(f"HTTP {status}: {_detail(raw)}")
        try:
            return json.loads(raw)
        except ValueError:
            self.close()
            raise ServerFault(f"HTTP {status} with a body that is not JSON") from None

    def _send(self, method: str, path: str, data: bytes | None) -> tuple[int, bytes]:
        if self._conn is None:
            cls = http.client.HTTPSConnection if self._https else http.client.HTTPConnection
            self._conn = cls(self._host, self._port, timeout=self.timeout)
        self._conn.request(method, self._base + path, body=data, headers=self.headers)
        resp = self._conn.getresponse()
        return resp.status, resp.read()


def _describe(e: BaseException) -> str:
    if isinstance(e, ConnectionRefusedError):
        return "connection refused"
    if isinstance(e, (ConnectionResetError, http.client.RemoteDisconnected, BrokenPipeError)):
        return "connection closed by the server"
    text = " ".join(str(e).split())
    return f"{type(e).__name__}: {text}" if text else type(e).__name__


def _detail(raw: bytes) -> str:
    """A server's error message in one line (its JSON `error.message`/`detail`, else the start of the body)."""
    try:
        obj = json.loads(raw)
    except ValueError:
        obj = None
    msg = None
    if isinstance(obj, dict):
        err = obj.get("error")
        msg = err.get("message") if isinstance(err, dict) else err if isinstance(err, str) else None
        msg = (
            msg
            or (obj.get("detail") if isinstance(obj.get("detail"), str) else None)
            or (json.dumps(obj.get("detail")) if obj.get("detail") else None)
        )
    text = msg or raw.decode("utf-8", "replace")
    text = " ".join(text.split())
    return text[:300] or "(empty body)"


@dataclass
class Probe:
    """What a server says about itself."""

    reachable: bool
    kind: str | None = None  # "llama" (llama-server: /props) or "vllm" (/v1/models owned_by vllm)
    model: str | None = None  # the first model /v1/models lists
    error: str | None = None


def probe(
    url: str, *, headers: dict[str, str] | None = None, timeout: float = PROBE_TIMEOUT, detect: bool = True
) -> Probe:
    """Ask /v1/models (the model's name, vLLM's owned_by) and, when `detect`, /props (llama-server)."""
    conn = Connection(url, timeout, headers)
    try:
        try:
            models = conn.request("GET", "/v1/models")
        except ServerFault as e:
            return Probe(False, error=str(e))
        except RequestRejected as e:
            models, err = None, str(e)
        else:
            err = None
        data = models.get("data") if isinstance(models, dict) else None
        first = data[0] if isinstance(data, list) and data and isinstance(data[0], dict) else {}
        model = first.get("id") if isinstance(first.get("id"), str) else None
        if not detect:
            return Probe(True, None, model, err)
        if first.get("owned_by") == "vllm":
            return Probe(True, "vllm", model)
        try:
            props = conn.request("GET", "/props")
        except (ServerFault, RequestRejected):
            props = None
        if isinstance(props, dict) and (
            "default_generation_settings" in props or "build_info" in props or "model_path" in props
        ):
            return Probe(True, "llama", model)
        return Probe(True, None, model, err)
    finally:
        conn.close()
