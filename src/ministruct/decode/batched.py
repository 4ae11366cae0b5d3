"""Batched decoding (issue 28): many generations at once, one model step for all of them.

Up to `parallel` generations are live, each in its own sequence of one llama.cpp
context (model.Sequences). Every round evaluates what each live generation needs (its
prompt, or its last token) in one `decode`, while the masks of every live generation
are built on the mask thread; then each draws its token with its own sampler, matcher
and budget, exactly as `Decoder.steps` does for one. A generation that ends frees its
slot, and the next request takes it in the next round (continuous batching); the live
ones move down into the lowest slots.

The shape of a round follows llama.cpp's cost of one: with a KV cache per sequence, a
batch whose sequences bring unequal token counts runs as one pass per count, and each
pass spans the whole range of sequence ids it touches, gaps included. So beside other
lines a stretch the grammar dictates goes one token a round (the same tokens, taken
without a draw; each is evaluated with the others' next tokens), and gaps in the slots
are closed; a generation that evaluates alone fast-forwards its stretches whole, as the
one-at-a-time decoder does.

Prompts that begin alike (the schema instruction before each record's prompt) share
that beginning: it is evaluated once and its KV cache copied, and each evaluates only
the rest; a prompt that repeats (samples of one prompt) is evaluated once. Generations
that have evaluated the same tokens so far (samples of one prompt, until their draws
differ) are one *line*: a round evaluates a line's next tokens once, in one of its
sequences, and the others follow on that sequence's KV cache; a generation whose tokens
part from its line's gets the cache of what they share copied (or, where it cannot be
copied, evaluates it again) and goes on in its own sequence.

    batch = BatchedDecoder(model, parallel=8)
    for request, outcome in batch.run(Request(job.decoder(p), on_step=...) for p in prompts):
        ...   # in the order generations finish; outcome: a Generation or the error it raised

Rows computed in a batch differ in the last bits from rows computed one sequence at a
time, so a token can change against `parallel=1`; for a given `parallel` and seed the
run is deterministic (the schedule depends only on the tokens).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Callable, Iterable, Iterator

import numpy as np

from ministruct.decode import fast_forward as ff
from ministruct.decode.defaults import checked_parallel
from ministruct.decode.loop import Decoder, Generation, Run, Step, mask_pool, masks_along, timed_mask
from ministruct.errors import MinistructError, UsageError

if TYPE_CHECKING:
    from ministruct.decode.model import Model
    from ministruct.decode.sequences import Sequences
CTX_PAD = 256  # llama.cpp pads a sequence's context to this many cells
MIN_SHARED = 16  # prompts share a KV-cache prefix when it is at least this many tokens

Masked = tuple["np.ndarray | None", float, bool]
NO_MASK: Masked = (None, 0.0, False)


@dataclass(eq=False)
class Request:
    """One generation to run: its (unstarted) Decoder, a callback for each Step (the step
    is not kept afterwards) and the caller's handle."""

    decoder: Decoder
    on_step: Callable[[Step], None] | None = None
    key: Any = None


@dataclass(eq=False)
class _Live:
    """A request in a slot: its Run and what this round asks of the model."""

    request: Request
    slot: int
    run: Run
    prompt: tuple[int, ...]
    fresh: bool = False  # its prompt is evaluated this round
    waits_for: "_Live | None" = None  # gets its prompt's KV cache copied from that one
    keep: int | None = None  # ... only its first `keep` tokens (None: the whole prompt and its row)
    # this round's plan
    tokens: list[int] = field(default_factory=list)
    n_rows: int = 0
    planned: list[int] = field(default_factory=list)
    done: bool = False
    evaluate_last: bool = False
    masked: Masked = NO_MASK
    mask_job: tuple | None = None  # (function, *arguments) for the mask thread
    mask_result: Any = None  # what it gave: a Masked, or one per planned token
    # lines: generations of one line have evaluated the same tokens (`history`)
    line: int = 0
    history: list[int] = field(default_factory=list)  # the prompt and every output token evaluated
    follows: "_Live | None" = None  # its KV cache is that one's, whose cache begins with `history`
    lost: bool = False  # its KV cache is empty (a copy failed): `history` is evaluated again

    @property
    def decoder(self) -> Decoder:
        return self.request.decoder


class BatchedDecoder:
    """Runs requests `parallel` at a time on one model (see the module docstring)."""

    def __init__(self, model: "Model", parallel: int, *, n_ctx: int | None = None) -> None:
        checked_parallel(parallel)
        if n_ctx is not None and not 1 <= n_ctx <= model.n_ctx:
            raise UsageError(f"n_ctx must be in [1, {model.n_ctx}], got {n_ctx!r}", parameter="n_ctx")
        self.model = model
        self.parallel = parallel
        self.n_ctx = n_ctx  # tokens per sequence when fixed; None: sized from the requests
        self._seqs: "Sequences | None" = None
        # the tokens kept in seqs.store, and the row after them when they are a whole prompt
        self._stored: tuple[tuple[int, ...], np.ndarray | None] | None = None
        self._slots: list[_Live | None] = []
        self._lines = 0

    def run(self, requests: Iterable[Request]) -> Iterator[tuple[Request, Generation | MinistructError]]:
        """Each request's outcome as soon as it is finished: its Generation, or the
        MinistructError it raised (BudgetTooSmall, a failed evaluation). The requests are
        taken lazily, one slot at a time.

        Every run starts from an empty context, so a run's outcomes depend only on its
        requests. The context holds as many sequences as the first requests fill (at most
        `parallel`), each as long as the longest of them needs (prompt + max_tokens), or
        `n_ctx` when given; a later request that needs more waits until the live ones
        have finished, and the context is made again, larger."""
        queue = _Lookahead(iter(requests))
        first = queue.peek_many(self.parallel)
        if not first:
            return
        seqs = self._sequences(len(first), max(_need(r) for r in first))
        seqs.clear_all()
        self._stored = None
        slots: list[_Live | None] = [None] * self.parallel
        self._slots = slots
        while True:
            yield from self._admit(slots, queue)
            seqs = self._seqs
            assert seqs is not None
            self._compact(slots, seqs)
            live = [s for s in slots if s is not None]
            if not live:
                return
            finished: list[_Live] = []
            crowded = len({s.line for s in live if s.waits_for is None}) > 1
            working = [s for s in live if s.waits_for is None and not self._prepare(s, finished, crowded)]
            jobs = [s for s in working if s.mask_job is not None]
            pending = mask_pool().submit(_run_jobs, [s.mask_job for s in jobs]) if jobs else None
            lines = self._lines_of([s for s in working if s.tokens], seqs)
            try:
                rows = seqs.decode([(s.slot, s.tokens, s.n_rows) for s, _ in lines])
            except MinistructError as e:
                if pending is not None:
                    pending.result()
                for s in live:
                    slots[s.slot] = None
                    yield s.request, e
                self._stored = None
                continue
            results = pending.result() if pending is not None else []
            for s, got in zip(jobs, results):
                s.mask_result = got
            by_slot: dict[int, np.ndarray] = {}
            for (first, members), got in zip(lines, rows):
                for m in members:
                    by_slot[m.slot] = got if m is first else got.copy()
            for s in working:
                if self._complete(s, by_slot.get(s.slot), seqs, queue):
                    finished.append(s)
            for s in finished:
                self._hand_over(s, seqs)
                slots[s.slot] = None
                yield s.request, s.decoder.finish(s.run)

    # -- admission ---------------------------------------------------------------

    def _admit(self, slots: list[_Live | None], queue: "_Lookahead") -> Iterator[tuple]:
        """Fill free slots from the queue; a request that cannot start is finished at once.
        A request longer than the context waits for the live ones to finish (then the
        context is made again to fit it)."""
        fresh: dict[tuple[int, ...], _Live] = {}
        seqs = self._seqs
        assert seqs is not None
        for slot in range(min(self.parallel, seqs.n_seq)):
            while slots[slot] is None:
                req = queue.peek()
                if req is None:
                    return
                if _need(req) > seqs.n_ctx:
                    if any(s is not None for s in slots):
                        return
                    seqs = self._sequences(seqs.n_seq, _need(req))
                queue.next()
                try:
                    run = req.decoder.start()
                except MinistructError as e:
                    yield req, e
                    continue
                prompt = tuple(req.decoder.prompt_tokens)
                self._lines += 1
                s = _Live(req, slot, run, prompt, line=self._lines, history=list(prompt))
                self._place(s, seqs, fresh)
                slots[slot] = s

    def _place(self, s: _Live, seqs: "Sequences", fresh: dict[tuple[int, ...], _Live]) -> None:
        """Start `s` from the longest KV-cache prefix on hand: the store's, or that of a
        prompt evaluated this round (then it waits for it); else its whole prompt is evaluated.
        `fresh` holds the prompts that this admission evaluates (this round, or the next
        after a shared beginning): a prompt given again waits for it and is on its line."""
        prompt, run = s.prompt, s.run
        stored = self._stored
        if stored is not None and stored[0] == prompt and stored[1] is not None:
            seqs.copy(seqs.store, s.slot)
            run.pending, run.ready, run.first = [], stored[1].copy(), False
            return
        if prompt in fresh:
            s.waits_for = fresh[prompt]
            return
        from_store = _usable(_common(stored[0], prompt), prompt) if stored is not None else 0
        leader, from_leader = None, 0
        for other in fresh.values():
            n = _usable(_common(other.prompt, prompt), prompt) if other.waits_for is None else 0
            if n > from_leader:
                leader, from_leader = other, n
        fresh[prompt] = s
        if leader is not None and from_leader > from_store:
            s.waits_for, s.keep = leader, from_leader
            return
        s.fresh = True
        if from_store and seqs.copy(seqs.store, s.slot, keep=from_store):
            run.pending = list(prompt[from_store:])
            return
        seqs.clear(s.slot)

    def _compact(self, slots: list[_Live | None], seqs: "Sequences") -> None:
        """Move the live generations into the lowest slots: llama.cpp evaluates a batch
        over the whole range of sequence ids it touches, so a gap in that range costs
        as much as a sequence in it (benchmarks/throughput.py, docs/batches.md)."""
        free = [i for i, s in enumerate(slots) if s is None]
        held = [i for i, s in enumerate(slots) if s is not None]
        while free and held and free[0] < held[-1]:  # (a slot emptied here is above every one held)
            dst, src = free.pop(0), held.pop()
            s = slots[src]
            assert s is not None
            if s.follows is None and s.waits_for is None:  # its cache is its own: copied along
                seqs.copy(src, dst)
            seqs.clear(src)
            s.slot = dst
            slots[dst], slots[src] = s, None

    # -- one round -----------------------------------------------------------------

    def _prepare(self, s: _Live, finished: list[_Live], crowded: bool) -> bool:
        """Plan this round for `s` (as one iteration of Decoder.steps); True when it ends
        before asking the model anything (then it is in `finished`). In a `crowded` round
        (another line evaluates too) a stretch the grammar dictates goes one token a
        round: its first token is taken now and evaluated in the next round."""
        run, dec = s.run, s.decoder
        matcher = dec.matcher
        s.tokens, s.n_rows, s.planned, s.masked, s.mask_job, s.mask_result = [], 0, [], NO_MASK, None, None
        if s.fresh:  # the prompt alone, so that its KV cache can be shared before it moves on
            s.tokens, s.n_rows = list(run.pending), 1
            return False
        if run.index >= dec.max_tokens:
            finished.append(s)
            return True
        if matcher is not None and matcher.is_terminated():
            run.stop = "grammar_done"
            finished.append(s)
            return True
        if dec.fast_forward:
            planned, done = ff.plan(dec.model, matcher, dec.max_tokens - run.index, budget_aware=dec.budget_aware)
            if planned and crowded:  # one token a round: this one is evaluated in the next
                planned, done = planned[:1], done and len(planned) == 1
            if planned:
                s.planned, s.done = planned, done
                s.evaluate_last = not crowded and not done and run.index + len(planned) < dec.max_tokens
                batch = planned if s.evaluate_last else planned[:-1]
                s.tokens = list(batch) if run.ready is not None else list(run.pending) + list(batch)
                if dec.forced_logits:  # the row before each planned token, and after the last
                    s.n_rows = len(batch) + (run.ready is None)
                else:  # only the row the next draw needs (Decoder.forced_logits)
                    s.n_rows = int(s.evaluate_last)
                remainings = [dec.remaining(run.index + i) for i in range(len(planned))]
                s.mask_job = (masks_along, matcher.fork(), planned, remainings)
                return False
        if matcher is not None:
            remaining = dec.remaining(run.index)
            if matcher.mask_ready(remaining):
                s.masked = timed_mask(matcher, remaining)
                if run.stops_before_draw(s.masked[0]):
                    finished.append(s)
                    return True
            else:
                s.mask_job = (timed_mask, matcher, remaining)
        if run.ready is None:
            s.tokens, s.n_rows = list(run.pending), 1
        return False

    def _complete(self, s: _Live, rows: np.ndarray | None, seqs: "Sequences", queue: "_Lookahead") -> bool:
        """Finish this round for `s` with its rows: its steps (to on_step); True when it ended."""
        run, on_step = s.run, s.request.on_step
        if s.fresh:
            assert rows is not None
            s.fresh = False
            run.pending, run.ready, run.first = [], rows[-1], False
            self._share(s, seqs, queue)
            return False
        if s.planned:
            if not s.decoder.forced_logits:  # the row after the last planned token, if asked for
                rows = [None] * len(s.planned) + ([rows[-1]] if s.evaluate_last and rows is not None else [])
            elif run.ready is not None:
                rows = np.concatenate([run.ready[None, :], rows]) if rows is not None else run.ready[None, :]
            run.first = False
            for step in run.forwarded(s.planned, rows, s.mask_result, evaluate_last=s.evaluate_last, done=s.done):
                if on_step is not None:
                    on_step(step)
            return False
        if run.ready is not None:
            logits, run.ready = run.ready, None
        else:
            assert rows is not None
            logits = rows[-1]
        masked = s.masked
        if s.mask_job is not None:
            masked = s.mask_result
            if run.stops_before_draw(masked[0]):
                return True
        step = run.take(logits, masked)
        if step is None:
            return True
        if on_step is not None:
            on_step(step)
        return run.over

    def _share(self, s: _Live, seqs: "Sequences", queue: "_Lookahead") -> None:
        """`s` has just evaluated its prompt: copy its KV cache (or the prefix they share)
        to the requests waiting for it, and keep it in the store when the next request
        begins like it."""
        assert s.run.ready is not None
        row = s.run.ready
        for w in self._slots:
            if w is None or w.waits_for is not s:
                continue
            w.waits_for = None
            if w.keep is None:  # the same prompt: on the same line, on s's cache
                w.line, w.follows = s.line, s
                w.run.pending, w.run.ready, w.run.first = [], row.copy(), False
                continue
            w.fresh = True
            kept = seqs.copy(s.slot, w.slot, keep=w.keep)
            w.run.pending = list(w.prompt[w.keep :] if kept else w.prompt)
        nxt = queue.peek()
        if nxt is None:
            return
        wanted = tuple(nxt.decoder.prompt_tokens)
        if wanted == s.prompt:
            seqs.copy(s.slot, seqs.store)
            self._stored = (s.prompt, row.copy())
            return
        n = _usable(_common(s.prompt, wanted), wanted)
        have = _common(self._stored[0], wanted) if self._stored is not None else 0
        if n > have:  # a failed copy leaves the store empty
            self._stored = (s.prompt[:n], None) if seqs.copy(s.slot, seqs.store, keep=n) else None

    # -- lines -------------------------------------------------------------------------

    def _lines_of(self, evaluated: list[_Live], seqs: "Sequences") -> list[tuple[_Live, list[_Live]]]:
        """This round's evaluations, one per line and tokens: (the generation that
        evaluates them, every generation that gets its rows). The others follow it; one
        that leaves the sequence it followed gets its own cache first."""
        groups: dict[tuple, list[_Live]] = {}
        for s in evaluated:
            key = (id(s),) if s.fresh else (s.line, tuple(s.tokens), s.n_rows)
            groups.setdefault(key, []).append(s)
        out = []
        for key, members in groups.items():
            own = [m for m in members if m.follows is None]
            first = next((m for m in own if not m.lost), own[0] if own else members[0])
            if first.follows is not None:
                self._own(first, seqs)
            if len(key) > 1:  # output tokens: the line moves on, on first's cache
                self._lines += 1
                for m in members:
                    m.history.extend(first.tokens)
                    m.line = self._lines
                    if m is not first:
                        m.follows = first
            if first.lost:  # its cache is empty: everything again
                first.lost = False
                first.tokens = list(first.history)
            out.append((first, members))
        return out

    def _own(self, s: _Live, seqs: "Sequences") -> None:
        """Give `s` a cache of its own: the first tokens of the one it follows, copied
        (after those that follow `s` have theirs: its cache is about to be replaced)."""
        src, s.follows = s.follows, None
        assert src is not None
        self._hand_over(s, seqs)
        s.lost = not seqs.copy(src.slot, s.slot, keep=len(s.history))

    def _hand_over(self, s: _Live, seqs: "Sequences") -> None:
        """`s`'s cache is about to be replaced (it is finished, or gets another's): the
        generations that follow it get caches of their own first."""
        for w in self._slots:
            if w is not None and w.follows is s:
                self._own(w, seqs)

    def _sequences(self, n_seq: int, need: int) -> "Sequences":
        """The context, made again when it has fewer than `n_seq` sequences or they are
        shorter than `need` tokens (empty when made again)."""
        n_ctx = max(self.n_ctx or 0, _rounded(need, self.model.n_ctx))
        n_seq = self.parallel if self.n_ctx else n_seq
        old = self._seqs
        if old is not None and old.n_seq >= n_seq and old.n_ctx >= n_ctx:
            return old
        if old is not None:
            n_seq, n_ctx = max(n_seq, old.n_seq), max(n_ctx, old.n_ctx)
            old.close()
        self._seqs = None
        self._stored = None
        self._seqs = self.model.sequences(n_seq, n_ctx)
        return self._seqs

    def close(self) -> None:
        """Free the batch's context (the model stays loaded)."""
        if self._seqs is not None:
            self._seqs.close()
            self._seqs = None
            self._stored = None


def _common(a: tuple[int, ...], b: tuple[int, ...]) -> int:
    """How many tokens `a` and `b` begin with alike."""
    n = min(len(a), len(b))
    for i in range(n):
        if a[i] != b[i]:
            return i
    return n


def _usable(shared: int, prompt: tuple[int, ...]) -> int:
    """The prefix worth copying for `prompt` when `shared` tokens are on hand: at least
    MIN_SHARED, and short of the whole prompt (its last token is evaluated for its row)."""
    n = min(shared, len(prompt) - 1)
    return n if n >= MIN_SHARED else 0


def _need(req: Request) -> int:
    """The context a request can fill: its prompt and every token it may add."""
    return len(req.decoder.prompt_tokens) + req.decoder.max_tokens


def _rounded(need: int, most: int) -> int:
    """`need` tokens rounded up to llama.cpp's padding of 256, at most `most`."""
    return min(most, -(-max(1, need) // CTX_PAD) * CTX_PAD)


def _run_jobs(jobs: list[tuple]) -> list[Any]:
    """The mask thread's work for one round: each job is (function, *arguments)."""
    return [fn(*args) for fn, *args in jobs]


class _Lookahead:
    """An iterator that can show its next item without taking it."""

    def __init__(self, it: Iterator[Request]) -> None:
        self._it = it
        self._ahead: list[Request] = []

    def peek(self) -> Request | None:
        got = self.peek_many(1)
        return got[0] if got else None

    def peek_many(self, k: int) -> list[Request]:
        """Up to the next `k` items, none taken."""
        while len(self._ahead) < k:
            got = next(self._it, None)
            if got is None:
                break
            self._ahead.append(got)
        return self._ahead[:k]

    def next(self) -> Request | None:
        got = self.peek()
        if got is not None:
            self._ahead.pop(0)
        return got
