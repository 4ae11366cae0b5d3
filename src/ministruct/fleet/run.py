"""A batch on a fleet: records sent concurrently, results handed back in input order.

    servers = connect(["http://a:8080", "http://b:8080"], constraint, settings, kind="llama")
    batch = FleetBatch(servers, constraint, settings, concurrency=2)
    status = batch.run(records, emit=lambda r: print(r.to_record()))

Each server gets `concurrency` worker threads that take records from one shared queue.
A fault (refused, reset, timeout, 5xx) puts the record back in the queue for whichever
server is free next, and backs the faulty server off (exponentially; after `max_faults`
in a row it is given up). A record faulted more than `retries` times, or left when no
server is, becomes an error record. An output our check rejects is resent up to
`retry_unverified` times (with another seed), then reported with `verified: false`.
Every record has exactly one attempt in flight at a time, and `emit` is called once per
record, in input order, as soon as the record is next in line. SIGINT/SIGTERM are
handled as in a local batch (jobs/batch.py's Interrupts): no new request starts, those
in flight finish, and every finished record up to the first unfinished one (a record
put back after a fault) is emitted, in input order: the output stays in input order,
which `--resume` relies on (the records after it run again). A
server given up (faults, or answers that show it ignored the constraint) is said
through `warn`; the summary line counts the results and each server's share.
"""

from __future__ import annotations

import queue
import signal
import threading
from dataclasses import dataclass, field, replace
from typing import Any, Callable, Iterable

from ministruct.errors import MinistructError, UsageError
from ministruct.fleet.client import Connection, RequestRejected, Server, ServerFault, probe
from ministruct.fleet.dialects import BadReply, Dialect, Reply, Settings, parse_reply
from ministruct.fleet.trace import trace_records
from ministruct.fleet.verify import Verdict, Verifier
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.tools import read_calls
from ministruct.jobs.batch import Abandoned, ConstraintCache, Interrupts, Resume, Tally, record_constraint
from ministruct.jobs.job import GenResult
from ministruct.jobs.records import InputRecord
from ministruct.jobs.think import ThinkSettings, think_on_servers

FINISH_TO_STOP = {"stop": "eos", "length": "max_tokens"}
FLEET_LABELS = ("verified", "unverified", "failed")


@dataclass
class FleetResult:
    """One record's outcome: local gen's result record plus `server`, `verified`, `resent`."""

    result: GenResult
    server: str | None
    verdict: Verdict | None  # None when no output came back (an error record)
    resent: int = 0
    trace: list[dict[str, Any]] | None = None

    @property
    def verified(self) -> bool:
        return self.verdict is not None and self.verdict.ok

    def to_record(self) -> dict[str, Any]:
        rec = self.result.to_record()
        rec["server"] = self.server
        rec.update(self.verdict.fields() if self.verdict is not None else {"verified": False})
        rec["resent"] = self.resent
        return rec


@dataclass(eq=False)
class _Plan:
    """What a record is sent with: its constraint and settings (the batch's, or its own)."""

    constraint: Constraint
    settings: Settings
    verifier: Verifier
    dialects: dict[str, Dialect] = field(default_factory=dict)


@dataclass
class _Job:
    index: int
    rec: InputRecord
    seed: int
    sample: int
    plan: _Plan
    faults: int = 0
    resent: int = 0
    last_error: str | None = None


@dataclass
class Ignored:
    """A server whose output shows it ignored the constraint (reported once per server)."""

    server: Server
    field: str  # the request field that carried the constraint
    reason: str
    record_id: Any


def connect(
    urls: list[str],
    constraint: Constraint,
    settings: Settings,
    *,
    kind: str | None = None,
    headers: dict[str, str] | None = None,
    warn: Callable[[str], None] = lambda m: None,
) -> list[Server]:
    """Probe each server: its model name and, without `kind`, its kind (llama-server: /props;
    vLLM: /v1/models). Settings the kind cannot honour raise UsageError here, before
    the batch. An unreachable server is reported through `warn` and starts given up."""
    if kind is not None:
        Dialect(kind, constraint, settings)  # raises before any network traffic
    servers: list[Server] = []
    for url in urls:
        p = probe(url, headers=headers, detect=kind is None)
        s = Server(url, kind or p.kind, p.model)
        if not p.reachable:
            warn(f"server {url}: not reachable ({p.error}); its share goes to the others")
            s.dead, s.last_error = True, p.error
        elif s.kind is None:
            raise UsageError(
                f"kind is not given and server {url} does not say what it is (no llama-server /props, "
                "and /v1/models does not say vllm): llama, vllm or openai?",
                parameter="kind",
            )
        else:
            Dialect(s.kind, constraint, settings)
        servers.append(s)
    return servers


class FleetBatch:
    """One constraint and one batch's settings on a fleet of servers."""

    def __init__(
        self,
        servers: list[Server],
        constraint: Constraint,
        settings: Settings,
        *,
        concurrency: int = 1,
        retry_unverified: int = 0,
        retries: int = 4,
        timeout: float = 300.0,
        headers: dict[str, str] | None = None,
        on_ignored: Callable[[Ignored], None] | None = None,
        warn: Callable[[str], None] = lambda m: None,
        constraints: ConstraintCache[Constraint] | None = None,
    ) -> None:
        """`constraints` loads a record's own constraint (a record's `schema`, `grammar`,
        `regex` or `choice`); without it the batch's constraint is the only one. With
        `settings.think`, `constraint` and what `constraints` loads think first already
        (jobs/think.py `think_on_servers`); a record's own `think` or `think_tokens` is
        applied here (to the constraint it answers with)."""
        if concurrency < 1:
            raise UsageError(f"concurrency must be >= 1, got {concurrency}", parameter="concurrency")
        if retry_unverified < 0:
            raise UsageError(f"retry_unverified must be >= 0, got {retry_unverified}", parameter="retry_unverified")
        if timeout <= 0:
            raise UsageError(f"timeout must be > 0 seconds, got {timeout}", parameter="timeout")
        self.servers = servers
        self.constraint = constraint
        self.settings = settings
        self.dialects = {s.kind: Dialect(s.kind, constraint, settings) for s in servers if s.kind}
        self.concurrency = concurrency
        self.retry_unverified = retry_unverified
        self.retries = retries
        self.timeout = timeout
        self.headers = headers
        self.on_ignored = on_ignored
        self.warn = warn
        self.tally = Tally(FLEET_LABELS)
        self._by_server: dict[str, int] = {}
        self._busy = 0  # requests in flight
        self._draining = False  # a signal came: workers start no new request
        self.verifier = Verifier(constraint)
        self.constraints = constraints
        self._base = _Plan(constraint, settings, self.verifier, self.dialects)
        self._plans: dict[tuple, _Plan] = {}
        self._thought: dict[tuple, tuple[Constraint, Constraint]] = {}
        self._pending: queue.Queue[_Job] = queue.Queue()
        self._results: queue.Queue[tuple[int, FleetResult]] = queue.Queue()
        self._stop = threading.Event()
        self._lock = threading.Lock()
        self._live = 0
        self._answered: dict[str, int] = {}
        self._ignored: set[str] = set()
        self._n = 1

    # -- the batch -----------------------------------------------------------------

    def run(
        self,
        records: Iterable[InputRecord],
        emit: Callable[[FleetResult], None],
        *,
        n: int = 1,
        resume: Resume | None = None,
        report: Callable[[str], None] | None = None,
    ) -> int:
        """Run every record (`n` samples each, seeds seed, seed+1, ...); call `emit` in input order.

        Returns the exit status of cli.md: 0 all verified, 1 any unverified or failed
        record (a bad input record is one, as in a local batch), 130/143 after
        SIGINT/SIGTERM (as a local batch: the requests in flight finish, every finished
        record is emitted; a second signal abandons those in flight). `resume` skips the
        samples already written; `report` receives the summary line. A FleetBatch runs
        one batch.
        """
        if self._stop.is_set():
            raise RuntimeError("this FleetBatch has run its batch; make a new one")
        resume = resume or Resume()
        resume.drop_cut_line()
        jobs, early, skipped = self._jobs(records, n, resume)
        for j in jobs:
            if j.index not in early:
                self._pending.put(j)
        threads = self._start_workers()
        done: dict[int, FleetResult] = dict(early)
        nxt = 0
        with Interrupts() as intr:
            try:
                while nxt < len(jobs):
                    while nxt in done:
                        self._emit(done.pop(nxt), emit)
                        nxt += 1
                    if nxt >= len(jobs) or (intr.signum is not None and self._settled()):
                        break
                    try:
                        idx, res = self._results.get(timeout=0.1)
                        done[idx] = res
                    except queue.Empty:
                        if self._live_workers() == 0 and intr.signum is None:
                            self._give_up(done)
            except (KeyboardInterrupt, Abandoned):  # KeyboardInterrupt: run outside the main thread
                intr.signum = intr.signum or signal.SIGINT
            finally:
                self._stop.set()
            if intr.signum is not None:  # what finished, in input order, up to the first unfinished
                self._drain(done)
                while nxt in done:
                    self._emit(done.pop(nxt), emit)
                    nxt += 1
        for t in threads:
            t.join(timeout=1.0)
        if report is not None:
            report(self._summary(skipped, intr))
        return intr.exit_code or self.tally.exit_code()

    def _jobs(self, records: Iterable[InputRecord], n: int, resume: Resume) -> tuple[list[_Job], dict, int]:
        """(the samples to run, the error records among them by index, records skipped by `resume`)."""
        base = self.settings.params.seed
        self._n = n
        jobs: list[_Job] = []
        early: dict[int, FleetResult] = {}
        skipped = 0
        for rec in records:
            done = resume.take(rec.id, 1 if rec.error else n)
            plan, error = self._base, rec.error
            if error is None and rec.settings:
                try:
                    plan = self._plan(rec.settings)
                except MinistructError as e:
                    error = f"{rec.where}: {e}"
            if error is not None:
                if done:
                    skipped += 1
                    continue
                early[len(jobs)] = FleetResult(GenResult.failed(rec.id, rec.value, error), None, None)
                jobs.append(_Job(len(jobs), rec, base, 0, plan))
                continue
            if done >= n:
                skipped += 1
            first = rec.settings.get("seed", base)
            for k in range(done, n):
                jobs.append(_Job(len(jobs), rec, first + k, k, plan))
        return jobs, early, skipped

    def _emit(self, res: FleetResult, emit: Callable[[FleetResult], None]) -> None:
        emit(res)
        self.tally.add("verified" if res.verified else "failed" if res.verdict is None else "unverified")
        if res.server is not None and res.verdict is not None:
            self._by_server[res.server] = self._by_server.get(res.server, 0) + 1

    def _settled(self) -> bool:
        """After a signal: no new request starts; True once none is in flight."""
        with self._lock:
            self._draining = True
            return self._busy == 0

    def _summary(self, skipped: int, intr: Interrupts) -> str:
        """The summary line: counts, the share of each server, the servers given up, a signal."""
        self.tally.skipped = skipped
        text = self.tally.line()
        if self._by_server:
            text += "; answered by " + ", ".join(f"{url} {k}" for url, k in self._by_server.items())
        gone = [s.url for s in self.servers if s.dead]
        if gone:
            text += "; given up: " + ", ".join(gone)
        if intr.signum is not None:
            text += f"; stopped by {intr.name()}"
        return text

    def _plan(self, own: dict[str, Any]) -> _Plan:
        """The plan of a record with its own (validated) settings; MinistructError when its
        constraint cannot be loaded or a server's kind cannot carry it."""
        constraint = self.constraint
        kind_value = record_constraint(own)
        if kind_value is not None:
            if self.constraints is None:
                raise UsageError("a record's own constraint needs a constraint loader", parameter="constraints")
            constraint = self.constraints.get(*kind_value)
        s = self.settings
        think = self._think_of(own)
        if think is not s.think:  # (the batch's constraints think as the batch does: see `think`)
            constraint = self._thinking(constraint.answer_part, think)
        varied = {k: own[k] for k in ("temperature", "top_p") if k in own}
        settings = replace(
            s,
            params=replace(s.params, **varied) if varied else s.params,
            max_tokens=own.get("max_tokens", s.max_tokens),
            system=own["system"] if "system" in own else s.system,
            think=think,
        )
        key = (id(constraint), settings)
        if key not in self._plans:
            same = constraint is self.constraint
            dialects = {k: Dialect(k, constraint, settings) for k in self.dialects}  # raises for a kind that cannot
            verifier = self.verifier if same else Verifier(constraint)
            self._plans[key] = _Plan(constraint, settings, verifier, dialects)
        return self._plans[key]

    def _think_of(self, own: dict[str, Any]) -> ThinkSettings | None:
        """A record's think settings: the batch's, unless it says `think` (true: the batch's,
        or the plain-text pair when the batch does not think) or `think_tokens`."""
        think = self.settings.think
        if own.get("think") is False:
            return None
        if own.get("think") or "think_tokens" in own:
            think = think or ThinkSettings()
            if "think_tokens" in own and own["think_tokens"] != think.think_tokens:
                think = think.with_tokens(own["think_tokens"])
        return think

    def _thinking(self, constraint: Constraint, think: ThinkSettings | None) -> Constraint:
        """`constraint` with the free text of `think` first (as think_on_servers), once per pair."""
        if think is None:
            return constraint
        key = (id(constraint), think)
        if key not in self._thought:
            self._thought[key] = (constraint, think_on_servers(constraint, think))  # (keeps `constraint` alive)
        return self._thought[key][1]

    def _start_workers(self) -> list[threading.Thread]:
        threads = []
        for s in self.servers:
            if s.dead or s.kind is None:
                continue
            for i in range(self.concurrency):
                t = threading.Thread(target=self._worker, args=(s,), name=f"fleet {s.url} #{i}", daemon=True)
                with self._lock:
                    self._live += 1
                threads.append(t)
        for t in threads:
            t.start()
        return threads

    def _live_workers(self) -> int:
        with self._lock:
            return self._live

    def _drain(self, done: dict[int, FleetResult]) -> None:
        while True:
            try:
                idx, res = self._results.get_nowait()
            except queue.Empty:
                return
            done[idx] = res

    def _give_up(self, done: dict[int, FleetResult]) -> None:
        """No worker is left: every unfinished record becomes an error record."""
        self._drain(done)
        last = "; ".join(f"{s.url}: {s.last_error}" for s in self.servers if s.last_error) or "no server"
        while True:
            try:
                job = self._pending.get_nowait()
            except queue.Empty:
                break
            done[job.index] = self._error(job, f"no server left to run it ({last})")

    # -- one worker ----------------------------------------------------------------

    def _worker(self, server: Server) -> None:
        conn = Connection(server.url, server.timeout or self.timeout, self.headers)
        try:
            while not self._stop.is_set() and not server.dead:
                server.wait_ready(self._stop)
                if self._stop.is_set() or server.dead:
                    break
                try:
                    job = self._pending.get(timeout=0.05)
                except queue.Empty:
                    continue
                with self._lock:
                    if self._draining:  # a signal came: this record is not started
                        self._pending.put(job)
                        break
                    self._busy += 1
                try:
                    self._attempt(job, server, job.plan.dialects[server.kind], conn)
                finally:
                    with self._lock:
                        self._busy -= 1
        finally:
            conn.close()
            with self._lock:
                self._live -= 1

    def _attempt(self, job: _Job, server: Server, dialect: Dialect, conn: Connection) -> None:
        seed = job.seed + job.resent * self._n  # a resend never reuses another sample's seed
        body = dialect.body(job.rec.value or "", seed=seed, model=server.model)
        try:
            reply = parse_reply(conn.request("POST", dialect.path, body), chat=job.plan.settings.chat)
        except (ServerFault, BadReply) as e:
            if server.fault(str(e)):
                self.warn(
                    f"server {server.url}: given up after {server.faults} faults in a row (last: {e}); "
                    "its records go to the others"
                )
            job.faults += 1
            job.last_error = f"{server.url}: {e}"
            if job.faults > self.retries:
                self._finish(job, self._error(job, f"gave up after {job.faults} faults (last: {job.last_error})"))
            else:
                self._pending.put(job)
            return
        except RequestRejected as e:
            server.ok()
            self._finish(job, self._error(job, f"{server.url} rejected the request: {e}", server=server.url))
            return
        server.ok()
        with self._lock:
            first = self._answered.get(server.url, 0) == 0
            self._answered[server.url] = self._answered.get(server.url, 0) + 1
        verdict = job.plan.verifier(reply.text, reply.tool_calls)
        if not verdict.ok:
            reason = job.plan.verifier.looks_unconstrained(reply.text, reply.finish_reason)
            if reason is None and first and reply.finish_reason == "length":
                reason = "cut at max_tokens on the server's first answer"
            if reason is not None:
                self._notice(Ignored(server, dialect.field, reason, job.rec.id))
            if self.verifier.looks_unconstrained(reply.text, reply.finish_reason) is not None:
                server.give_up("it ignored the constraint")  # its other answers would be unconstrained too
            if job.resent < self.retry_unverified:
                job.resent += 1
                self._pending.put(job)
                return
        self._finish(job, self._result(job, server, reply, verdict))

    def _notice(self, event: Ignored) -> None:
        with self._lock:
            if event.server.url in self._ignored:
                return
            self._ignored.add(event.server.url)
        if self.on_ignored is not None:
            self.on_ignored(event)

    def _finish(self, job: _Job, res: FleetResult) -> None:
        self._results.put((job.index, res))

    # -- result records -------------------------------------------------------------

    def _result(self, job: _Job, server: Server, reply: Reply, verdict: Verdict) -> FleetResult:
        finish = reply.finish_reason
        thinking = verdict.reasoning is not None
        res = GenResult(
            id=job.rec.id,
            prompt=job.rec.value or "",
            output=verdict.answer if thinking else reply.text,  # type: ignore[arg-type]
            complete=verdict.ok,
            stop_reason=FINISH_TO_STOP.get(finish or "", finish or "unknown"),
            n_tokens=reply.n_tokens,
            json_value=verdict.value if verdict.ok else None,
            has_json=job.plan.constraint.kind == "schema",
            reasoning=verdict.reasoning,
            # the server does not say whether its grammar's bound closed the thinking
            think_end=None,
        )
        spec = job.plan.constraint.tools
        if spec is not None:
            res.has_tools = True
            if reply.tool_calls is not None:
                res.content, res.tool_calls = reply.text or None, list(reply.tool_calls)
            else:
                read = read_calls(spec, reply.text)
                res.content, res.tool_calls = read.content, read.tool_calls(salt=f"{job.rec.id}\0{res.prompt}")
        out = FleetResult(res, server.url, verdict, job.resent)
        if self.settings.top_logprobs is not None:
            summary = {"verified": verdict.ok, "finish_reason": finish}
            out.trace = trace_records(
                job.rec.id,
                server.url,
                job.plan.constraint,
                self._sampling(job.plan),
                self.settings.top_logprobs,
                reply.logprobs,
                summary,
            )
        return out

    def _error(self, job: _Job, message: str, *, server: str | None = None) -> FleetResult:
        out = FleetResult(GenResult.failed(job.rec.id, job.rec.value or "", message), server, None, job.resent)
        if self.settings.top_logprobs is not None:
            out.trace = trace_records(
                job.rec.id,
                server,
                job.plan.constraint,
                self._sampling(job.plan),
                self.settings.top_logprobs,
                None,
                {"error": message},
            )
        return out

    def _sampling(self, plan: _Plan) -> dict[str, Any]:
        return {**plan.settings.params.to_dict(), "max_tokens": plan.settings.max_tokens}
