"""The decode loop: evaluate, read logits, mask, sample, advance; one Step per token.

Where the grammar dictates a stretch of bytes, the loop fast-forwards (fast_forward.py):
the stretch's tokens are evaluated in one batch and yielded as Steps marked
`fast_forward`, without a draw each (`fast_forward=False`: one sampled step per token).

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
from typing import TYPE_CHECKING, Iterator, Protocol, Sequence, runtime_checkable

import numpy as np

from ministruct import fast_forward as ff
from ministruct.errors import BudgetTooSmall, ModelError, NoLegalContinuation, UsageError
from ministruct.sampling import Sampler, SamplingParams

if TYPE_CHECKING:
    from ministruct.model import Model

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
    logits: np.ndarray  # the captured row the sampler used (float32, n_logits)
    mask: np.ndarray | None  # the legal set (bool, n_logits); None when unconstrained
    mask_us: float  # time spent in matcher.mask() for this step, microseconds
    budget_limited: bool = False  # the token budget narrowed the legal set at this step
    fast_forward: bool = False  # dictated by the grammar, evaluated in a batch, not drawn

    @property
    def text(self) -> str:
        return self.token.decode("utf-8", "replace")


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
    ) -> None:
        if max_tokens < 0:
            raise UsageError(f"max_tokens must be >= 0, got {max_tokens}", parameter="max_tokens")
        self.prompt_tokens = [int(t) for t in prompt_tokens]
        if not self.prompt_tokens:
            raise UsageError("the prompt is empty (no tokens to condition on)")
        n_ctx = model.n_ctx
        if len(self.prompt_tokens) + max_tokens > n_ctx:
            raise ModelError(
                f"prompt ({len(self.prompt_tokens)} tokens) + --max-tokens {max_tokens} "
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
        """Yield one Step per drawn or fast-forwarded token; sets `.result` when done."""
        if self._started:
            raise RuntimeError("a Decoder runs once; create a new one")
        self._started = True
        t0 = time.perf_counter()
        model, matcher = self.model, self.matcher
        vocab = model.vocabulary
        eog = np.fromiter(sorted(vocab.eog_ids), dtype=np.int64)
        sampler = Sampler(self.params)
        if matcher is not None and self.reset_matcher:
            matcher.reset()
        if self.budget_aware:
            least = matcher.min_tokens_to_complete()
            if least is None:
                # no completion the bound can count (a vocabulary missing some bytes): the
                # budget cannot be kept soundly, so cut plainly
                self.budget_aware = False
            elif least > self.max_tokens:
                raise BudgetTooSmall(self.max_tokens, least)  # before anything is evaluated
        history = list(self.prompt_tokens)
        out_ids: list[int] = []
        out = bytearray()
        pending: list[int] = self.prompt_tokens
        ready: np.ndarray | None = None  # the next step's logits row when a batch already gave it
        first = True
        stop, error, n_steps, n_ff = "max_tokens", None, 0, 0

        limited_any = False
        index = 0
        while index < self.max_tokens:
            mask, mask_us, limited = None, 0.0, False
            pending_mask = None
            remaining = self.max_tokens - index if self.budget_aware else None
            if matcher is not None:
                # the mask depends only on the output so far: decide before running the model
                if matcher.is_terminated():
                    stop = "grammar_done"
                    break
                if self.fast_forward:
                    planned, done = ff.plan(model, matcher, self.max_tokens - index, budget_aware=self.budget_aware)
                    if planned:
                        # the grammar dictates the next tokens: one batch, no draws
                        evaluate_last = not done and index + len(planned) < self.max_tokens
                        rows, masks = self._fast_forward(planned, pending, ready, first, index, evaluate_last)
                        first, pending = False, []
                        ready = rows[len(planned)] if evaluate_last else None
                        for i, token in enumerate(planned):
                            mask, mask_us, limited = masks[i]
                            piece = vocab.token_bytes(token)
                            sampler.skip()  # one random number per token, as a forced draw takes
                            n_steps += 1
                            n_ff += 1
                            limited_any = limited_any or limited
                            yield Step(index, token, piece, rows[i], mask, mask_us, limited, fast_forward=True)
                            matcher.advance(token)
                            out_ids.append(token)
                            out += piece
                            history.append(token)
                            index += 1
                        if not evaluate_last and not done:
                            pending = [planned[-1]]
                        continue
                if not matcher.mask_ready(remaining):
                    # a mask not computed before: build it while the model evaluates
                    # (llama.cpp releases the GIL), so its cost hides behind the forward pass
                    pending_mask = _pool().submit(_timed_mask, matcher, remaining)
                else:
                    mask, mask_us, limited = _timed_mask(matcher, remaining)
                    if _grammar_done(matcher, mask, eog) or not mask.any():
                        stop, error = _stop_before_eval(matcher, mask, eog, index, out)
                        break
            if ready is not None:
                logits, ready = ready, None
            else:
                if first:
                    model.prefill(pending)
                    first = False
                else:
                    model.eval(pending)
                logits = None
            if pending_mask is not None:
                mask, mask_us, limited = pending_mask.result()
                if _grammar_done(matcher, mask, eog) or not mask.any():
                    stop, error = _stop_before_eval(matcher, mask, eog, index, out)
                    break
            if logits is None:
                logits = model.logits()
            try:
                token = sampler.sample(logits, mask, history)
            except NoLegalContinuation:
                stop = "no_legal_continuation"
                error = NoLegalContinuation(index, bytes(out))
                break
            n_steps += 1
            limited_any = limited_any or limited
            is_eog = token in vocab.eog_ids
            piece = b"" if is_eog else vocab.token_bytes(token)
            yield Step(index, token, piece, logits, mask, mask_us, limited)
            if is_eog:
                stop = "eos"
                break
            if matcher is not None:
                matcher.advance(token)
            out_ids.append(token)
            out += piece
            history.append(token)
            pending = [token]
            index += 1

        if matcher is None:
            complete = stop == "eos"
        else:
            complete = stop != "no_legal_continuation" and bool(matcher.is_accepting())
        self._result = Generation(
            tokens=out_ids,
            output=bytes(out),
            stop_reason=stop,
            complete=complete,
            prompt_tokens=list(self.prompt_tokens),
            error=error,
            n_steps=n_steps,
            decode_s=time.perf_counter() - t0,
            budget_limited=limited_any,
            n_fast_forward=n_ff,
        )

    def _fast_forward(
        self,
        planned: list[int],
        pending: list[int],
        ready: np.ndarray | None,
        first: bool,
        index: int,
        evaluate_last: bool,
    ) -> tuple[np.ndarray, list[tuple[np.ndarray, float, bool]]]:
        """Evaluate the pending tokens and the planned ones in one batch: (logits rows, the
        row before each planned token and, with `evaluate_last`, the row after the last;
        each planned token's (mask, mask_us, budget_limited)). The masks are built on the
        worker thread while the model runs."""
        model, matcher = self.model, self.matcher
        remainings = [self.max_tokens - (index + i) if self.budget_aware else None for i in range(len(planned))]
        masks = _pool().submit(_masks_along, matcher.fork(), planned, remainings)
        batch = planned if evaluate_last else planned[:-1]
        if ready is not None:
            rows = np.concatenate([ready[None, :], model.eval_rows(batch)])
        elif first:
            model.prefill(pending)
            rows = np.concatenate([model.logits()[None, :], model.eval_rows(batch)])
        else:
            rows = model.eval_rows(list(pending) + list(batch))[len(pending) - 1 :]
        return rows, masks.result()


_POOL: ThreadPoolExecutor | None = None


def _pool() -> ThreadPoolExecutor:
    global _POOL
    if _POOL is None:
        _POOL = ThreadPoolExecutor(max_workers=1, thread_name_prefix="ministruct-mask")
    return _POOL


def _timed_mask(matcher: TokenMatcher, remaining: int | None) -> tuple[np.ndarray, float, bool]:
    """(mask, microseconds, whether the budget narrowed it)."""
    m0 = time.perf_counter()
    mask = np.asarray(matcher.mask(remaining), dtype=bool)
    limited = False
    if remaining is not None:
        full = matcher.mask()
        limited = mask is not full and not np.array_equal(mask, full)
    return mask, (time.perf_counter() - m0) * 1e6, limited


def _masks_along(
    matcher: TokenMatcher, tokens: Sequence[int], remainings: Sequence[int | None]
) -> list[tuple[np.ndarray, float, bool]]:
    """(mask, microseconds, budget narrowed) before each of `tokens`, advancing `matcher`
    (a fork: the decoder's own matcher is advanced as the steps are yielded)."""
    out = []
    for token, remaining in zip(tokens, remainings):
        out.append(_timed_mask(matcher, remaining))
        matcher.advance(token)
    return out


def _stop_before_eval(matcher, mask, eog, index: int, out: bytearray):
    """(stop_reason, error) when no token needs drawing: grammar done or nothing legal."""
    if _grammar_done(matcher, mask, eog):
        return "grammar_done", None
    return "no_legal_continuation", NoLegalContinuation(index, bytes(out))


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
) -> Decoder:
    """A Decoder for one generation: iterate it for Steps, then read `.result`.

    With `budget_aware` (the default) the legal set is narrowed, near the end of the
    budget, to tokens after which a complete output still fits in `max_tokens`;
    BudgetTooSmall when not even the shortest completion fits. With `fast_forward` (the
    default) stretches the grammar dictates are evaluated in one batch (fast_forward.py)."""
    return Decoder(
        model,
        prompt_tokens,
        matcher,
        params,
        max_tokens=max_tokens,
        budget_aware=budget_aware,
        fast_forward=fast_forward,
    )
