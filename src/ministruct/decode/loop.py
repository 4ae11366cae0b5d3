"""The decode loop: evaluate, read logits, mask, sample, advance; one Step per token.

Where the grammar dictates a stretch of bytes, the loop fast-forwards (fast_forward.py):
the stretch's tokens are evaluated in one batch and yielded as Steps marked
`fast_forward`, without a draw each (`fast_forward=False`: one sampled step per token).
With `forced_logits=False` the batch computes only the logits row the next draw needs
and the fast-forwarded Steps carry no row (`Step.logits` is None): the model's output
layer is most of a token's cost on a large vocabulary, so the rows of dictated tokens
are worth computing only for whoever reads their Z (a trace, the tool scores).

    decoder = generate(model, prompt_ids, matcher, params, max_tokens=64)
    for step in decoder:          # every step (diagnostics need them all)
        ...
    result = decoder.result       # the Generation, once the steps are exhausted

or simply `generate(...).run()` for the Generation alone.
"""

from __future__ import annotations

import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from ministruct.decode import fast_forward as ff
from ministruct.decode.defaults import checked_max_tokens
from ministruct.decode.sampling import Sampler, SamplingParams
from ministruct.engine.budget import output_budget
from ministruct.errors import ModelError, NoLegalContinuation, UsageError

if TYPE_CHECKING:
    from ministruct.decode.model import Model

STOP_REASONS = ("eos", "grammar_done", "max_tokens", "no_legal_continuation")


@runtime_checkable
class TokenMatcher(Protocol):
    """What the decoder needs from a matcher (engine.matcher.Matcher fits)."""

    def reset(self) -> None: ...
    def mask(self, remaining: int | None = None) -> np.ndarray: ...
    def mask_ready(self, remaining: int | None = None) -> bool: ...
    def advance(self, token_id: int) -> None: ...
    def is_accepting(self) -> bool: ...
    def is_terminated(self) -> bool: ...
    def min_tokens_to_complete(self) -> int | None: ...


@dataclass(frozen=True, eq=False)
class Step:
    """One generated token and everything that decided it."""

    index: int
    token_id: int
    token: bytes  # the bytes this token adds to the output (b"" for control tokens)
    logits: np.ndarray | None  # the row the sampler used (float32, n_logits); None: fast-forwarded without rows
    mask: np.ndarray | None  # the legal set (bool, n_logits); None when unconstrained
    mask_us: float  # time spent in matcher.mask() for this step, microseconds
    budget_limited: bool = False  # the token budget narrowed the legal set at this step
    fast_forward: bool = False  # dictated by the grammar, evaluated in a batch, not drawn
    phase_state: Any = None  # the matcher's phase before this token (engine/think.py), if it has phases

    @property
    def text(self) -> str:
        return self.token.decode("utf-8", "replace")

    @property
    def phase(self) -> str | None:
        """`think` or `answer` for a free-text-first grammar (the configuration this token was drawn in)."""
        return getattr(self.phase_state, "phase", None)


@dataclass
class Generation:
    """The result of one generation."""

    tokens: list[int]  # generated ids that are part of the output (no EOG)
    output: bytes
    stop_reason: str
    complete: bool  # the grammar accepts the output (unconstrained: stopped at EOG)
    prompt_tokens: list[int] = field(default_factory=list)
    error: NoLegalContinuation | None = None
    n_steps: int = 0  # tokens drawn, including a final EOG
    decode_s: float = 0.0  # wall time of the loop (model + mask + sampler)
    budget_limited: bool = False  # the token budget narrowed the legal set at some step
    n_fast_forward: int = 0  # output tokens fast-forwarded (not drawn)
    phase_state: Any = None  # the matcher's phase at the end, if it has phases (engine/think.py)
    particles: Any = None  # with particles: their smc.ParticleStats

    @property
    def text(self) -> str:
        return self.output.decode("utf-8", "replace")

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)


class Decoder:
    """One generation: iterate for the Steps; `.result` holds the Generation afterwards."""

    def __init__(
        self,
        model: "Model",
        prompt_tokens: Sequence[int],
        matcher: TokenMatcher | None,
        params: SamplingParams | None = None,
        *,
        max_tokens: int = 256,
        reset_matcher: bool = True,
        budget_aware: bool = True,
        fast_forward: bool = True,
        forced_logits: bool = True,
    ) -> None:
        checked_max_tokens(max_tokens)
        self.prompt_tokens = [int(t) for t in prompt_tokens]
        if not self.prompt_tokens:
            raise UsageError("the prompt is empty (no tokens to condition on)")
        n_ctx = model.n_ctx
        if len(self.prompt_tokens) + max_tokens > n_ctx:
            raise ModelError(
                f"prompt ({len(self.prompt_tokens)} tokens) + max_tokens={max_tokens} "
                f"exceed the context size n_ctx={n_ctx}"
            )
        self.model = model
        self.matcher = matcher
        self.params = params or SamplingParams()
        self.max_tokens = max_tokens
        self.reset_matcher = reset_matcher
        self.budget_aware = budget_aware and matcher is not None
        # fast-forward needs a matcher that knows its forced bytes and a batch-evaluating model
        self.fast_forward = fast_forward and ff.supported(model, matcher)
        self.forced_logits = forced_logits  # fast-forwarded Steps carry their logits row
        self._result: Generation | None = None
        self._started = False

    @property
    def result(self) -> Generation:
        if self._result is None:
            raise RuntimeError("the generation has not finished: exhaust steps() first")
        return self._result

    def __iter__(self) -> Iterator[Step]:
        return self.steps()

    def run(self) -> Generation:
        """Run to the end, discarding the steps; return the Generation."""
        for _ in self.steps():
            pass
        return self.result

    def steps(self) -> Iterator[Step]:
        """Yield one Step per drawn or fast-forwarded token; sets `.result` when done.

        Each step: the mask (decided by the output so far, so built while the model
        evaluates), the logits row, the draw (sampling.py's order), the advance. Where the
        grammar dictates the next tokens, `_forward` yields them from one batch instead."""
        run = self.start()
        matcher = self.matcher
        while run.index < self.max_tokens:
            if matcher is not None and matcher.is_terminated():
                run.stop = "grammar_done"
                break
            if self.fast_forward:
                planned, done = ff.plan(
                    self.model, matcher, self.max_tokens - run.index, budget_aware=self.budget_aware
                )
                if planned:
                    yield from self._forward(run, planned, done)
                    continue
            row = self._masked_row(run)
            if row is None:
                break
            step = run.take(*row)
            if step is None:
                break
            yield step
            if run.over:
                break
        self.finish(run)

    def start(self) -> "Run":
        """Begin the generation (once): the matcher reset, the budget rule checked
        (BudgetTooSmall when no complete output fits); the Run that holds its state."""
        if self._started:
            raise RuntimeError("a Decoder runs once; create a new one")
        self._started = True
        run = Run(self)
        matcher = self.matcher
        if matcher is not None and self.reset_matcher:
            matcher.reset()
        if self.budget_aware:
            self.budget_aware = output_budget(matcher.min_tokens_to_complete(), self.max_tokens) is not None
        return run

    def finish(self, run: "Run") -> Generation:
        """End the generation: `.result` is set from `run`."""
        self._result = run.generation()
        return self._result

    def remaining(self, index: int) -> int | None:
        """The token budget left at output index `index` for the legal set (None: not budget-aware)."""
        return self.max_tokens - index if self.budget_aware else None

    def _masked_row(self, run: "Run") -> tuple[np.ndarray, tuple[np.ndarray | None, float, bool]] | None:
        """The next logits row and its (mask, mask_us, budget_limited); None when the
        generation stops before a draw (grammar done, or nothing legal: `run` says which)."""
        matcher = self.matcher
        masked: tuple[np.ndarray | None, float, bool] = (None, 0.0, False)
        pending_mask = None
        if matcher is not None:
            remaining = self.remaining(run.index)
            if matcher.mask_ready(remaining):
                masked = timed_mask(matcher, remaining)
                if run.stops_before_draw(masked[0]):
                    return None
            else:
                # a mask not computed before: build it while the model evaluates
                # (llama.cpp releases the GIL), so its cost hides behind the forward pass
                pending_mask = mask_pool().submit(timed_mask, matcher, remaining)
        logits = run.evaluate_pending()
        if pending_mask is not None:
            masked = pending_mask.result()
            if run.stops_before_draw(masked[0]):
                return None
        return logits, masked

    def _forward(self, run: "Run", planned: list[int], done: bool) -> Iterator[Step]:
        """Steps for tokens the grammar dictates: evaluated in one batch, no draws."""
        evaluate_last = not done and run.index + len(planned) < self.max_tokens
        rows, masks = self._fast_forward(planned, run.pending, run.ready, run.first, run.index, evaluate_last)
        run.first = False
        yield from run.forwarded(planned, rows, masks, evaluate_last=evaluate_last, done=done)

    def _fast_forward(
        self,
        planned: list[int],
        pending: list[int],
        ready: np.ndarray | None,
        first: bool,
        index: int,
        evaluate_last: bool,
    ) -> tuple[Sequence[np.ndarray | None], list[tuple[np.ndarray, float, bool]]]:
        """Evaluate the pending tokens and the planned ones in one batch: (logits rows, the
        row before each planned token and, with `evaluate_last`, the row after the last;
        each planned token's (mask, mask_us, budget_limited)). The masks are built on the
        worker thread while the model runs. Without `forced_logits` the rows before the
        planned tokens are None and only the row after the last is computed (the same
        batches, so that row is bit for bit the one a batch of every row gives)."""
        model, matcher = self.model, self.matcher
        remainings = [self.remaining(index + i) for i in range(len(planned))]
        masks = mask_pool().submit(masks_along, matcher.fork(), planned, remainings)
        batch = planned if evaluate_last else planned[:-1]
        if not self.forced_logits:
            if not evaluate_last and not first:  # the generation ends with them: no row is read
                return [None] * len(planned), masks.result()
            if first:
                model.prefill(pending)
                model.eval(batch)
            else:
                model.eval(list(pending) + list(batch))
            after = [model.logits()] if evaluate_last else []
            return [None] * len(planned) + after, masks.result()
        if ready is not None:
            rows = np.concatenate([ready[None, :], model.eval_rows(batch)])
        elif first:
            model.prefill(pending)
            rows = np.concatenate([model.logits()[None, :], model.eval_rows(batch)])
        else:
            rows = model.eval_rows(list(pending) + list(batch))[len(pending) - 1 :]
        return rows, masks.result()


class Run:
    """One generation's mutable state inside Decoder.steps."""

    def __init__(self, decoder: Decoder) -> None:
        self.decoder = decoder
        self.t0 = time.perf_counter()
        self.sampler = Sampler(decoder.params)
        self.eog = np.fromiter(sorted(decoder.model.vocabulary.eog_ids), dtype=np.int64)
        self.history = list(decoder.prompt_tokens)
        self.out_ids: list[int] = []
        self.out = bytearray()
        self.pending: list[int] = decoder.prompt_tokens  # evaluated before the next row is read
        self.ready: np.ndarray | None = None  # the next row, when a batch already gave it
        self.first = True
        self.index = 0
        self.n_steps = self.n_ff = 0
        self.limited_any = False
        self.over = False  # ended by an end-of-generation token
        self.stop, self.error = "max_tokens", None

    def take(self, logits: np.ndarray, masked: tuple[np.ndarray | None, float, bool]) -> Step | None:
        """Draw the next token from `logits` under `masked` = (mask, mask_us, budget_limited)
        and take it into the output (the matcher advances); its Step, or None when nothing
        is legal (the stop reason says so). An end-of-generation token sets `over`."""
        mask, mask_us, limited = masked
        vocab = self.decoder.model.vocabulary
        try:
            token = self.sampler.sample(logits, mask, self.history)
        except NoLegalContinuation:
            self.stop, self.error = "no_legal_continuation", NoLegalContinuation(self.index, bytes(self.out))
            return None
        is_eog = token in vocab.eog_ids
        piece = b"" if is_eog else vocab.token_bytes(token)
        self.n_steps += 1
        self.limited_any = self.limited_any or limited
        step = Step(
            self.index, token, piece, logits, mask, mask_us, limited, phase_state=_phase_of(self.decoder.matcher)
        )
        if is_eog:
            self.stop, self.over = "eos", True
            return step
        if self.decoder.matcher is not None:
            self.decoder.matcher.advance(token)
        self.accept(token, piece)
        self.pending = [token]
        return step

    def forwarded(
        self,
        planned: list[int],
        rows: Sequence[np.ndarray | None],
        masks: list[tuple[np.ndarray, float, bool]],
        *,
        evaluate_last: bool,
        done: bool,
    ) -> Iterator[Step]:
        """Steps for fast-forwarded tokens, given the row before each (None: not computed)
        and, with `evaluate_last`, the row after the last, and each token's (mask, mask_us,
        budget_limited)."""
        self.pending = []
        self.ready = rows[len(planned)] if evaluate_last else None
        vocab, matcher = self.decoder.model.vocabulary, self.decoder.matcher
        for i, token in enumerate(planned):
            mask, mask_us, limited = masks[i]
            piece = vocab.token_bytes(token)
            self.sampler.skip()  # one random number per token, as a forced draw takes
            self.n_steps += 1
            self.n_ff += 1
            self.limited_any = self.limited_any or limited
            phase = _phase_of(matcher)
            yield Step(self.index, token, piece, rows[i], mask, mask_us, limited, fast_forward=True, phase_state=phase)
            matcher.advance(token)
            self.accept(token, piece)
        if not evaluate_last and not done:
            self.pending = [planned[-1]]

    def evaluate_pending(self) -> np.ndarray:
        """The logits row after the pending tokens (prefilled first, then evaluated)."""
        model = self.decoder.model
        if self.ready is not None:
            row, self.ready = self.ready, None
            return row
        if self.first:
            model.prefill(self.pending)
            self.first = False
        else:
            model.eval(self.pending)
        return model.logits()

    def stops_before_draw(self, mask: np.ndarray) -> bool:
        """Whether the generation ends before a draw (grammar done or nothing legal); sets the stop reason."""
        matcher = self.decoder.matcher
        if _grammar_done(matcher, mask, self.eog):
            self.stop = "grammar_done"
            return True
        if not mask.any():
            self.stop, self.error = "no_legal_continuation", NoLegalContinuation(self.index, bytes(self.out))
            return True
        return False

    def accept(self, token: int, piece: bytes) -> None:
        """A token joins the output (the matcher has advanced already, if any)."""
        self.out_ids.append(token)
        self.out += piece
        self.history.append(token)
        self.index += 1

    def generation(self) -> Generation:
        matcher = self.decoder.matcher
        if matcher is None:
            complete = self.stop == "eos"
        else:
            complete = self.stop != "no_legal_continuation" and bool(matcher.is_accepting())
        return Generation(
            tokens=self.out_ids,
            output=bytes(self.out),
            stop_reason=self.stop,
            complete=complete,
            prompt_tokens=list(self.decoder.prompt_tokens),
            error=self.error,
            n_steps=self.n_steps,
            decode_s=time.perf_counter() - self.t0,
            budget_limited=self.limited_any,
            n_fast_forward=self.n_ff,
            phase_state=_phase_of(matcher),
        )


_POOL: ThreadPoolExecutor | None = None


def mask_pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ministruct-mask")
    return _POOL


def timed_mask(matcher: TokenMatcher, remaining: int | None) -> tuple[np.ndarray, float, bool]:
    """(mask, microseconds, whether the budget narrowed it)."""
    m0 = time.perf_counter()
    mask = np.asarray(matcher.mask(remaining), dtype=bool)
    limited = False
    if remaining is not None:
        full = matcher.mask()
        limited = mask is not full and not np.array_equal(mask, full)
    return mask, (time.perf_counter() - m0) * 1e6, limited


def masks_along(
    matcher: TokenMatcher, tokens: Sequence[int], remainings: Sequence[int | None]
) -> list[tuple[np.ndarray, float, bool]]:
    """(mask, microseconds, budget narrowed) before each of `tokens`, advancing `matcher`
    (a fork: the decoder's own matcher is advanced as the steps are yielded)."""
    out = []
    for token, remaining in zip(tokens, remainings):
        out.append(timed_mask(matcher, remaining))
        matcher.advance(token)
    return out


def _phase_of(matcher: TokenMatcher | None) -> Any:
    return getattr(matcher, "phase_state", None)


def _grammar_done(matcher: TokenMatcher, mask: np.ndarray, eog: np.ndarray) -> bool:
    """Complete, and nothing but end-of-generation could follow."""
    if matcher.is_terminated():
        return True
    if not matcher.is_accepting():
        return False
    if eog.size:
        mask = mask.copy()
        mask[eog[eog < mask.shape[0]]] = False
    return not mask.any()


def generate(
    model: "Model",
    prompt_tokens: Sequence[int],
    matcher: TokenMatcher | None,
    params: SamplingParams | None = None,
    *,
    max_tokens: int = 256,
    budget_aware: bool = True,
    fast_forward: bool = True,
    forced_logits: bool = True,
) -> Decoder:
    """A Decoder for one generation: iterate it for Steps, then read `.result`.

    With `budget_aware` (the default) the legal set is narrowed, near the end of the
    budget, to tokens after which a complete output still fits in `max_tokens`;
    BudgetTooSmall when not even the shortest completion fits. With `fast_forward` (the
    default) stretches the grammar dictates are evaluated in one batch (fast_forward.py);
    `forced_logits=False` leaves their Steps without logits rows (cheaper: see the module
    docstring)."""
    return Decoder(
        model,
        prompt_tokens,
        matcher,
        params,
        max_tokens=max_tokens,
        budget_aware=budget_aware,
        fast_forward=fast_forward,
        forced_logits=forced_logits,
    )
