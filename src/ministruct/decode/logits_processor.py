"""A constraint as a logits processor for llama-cpp-python's own decode loop.

    from llama_cpp import LogitsProcessorList, StoppingCriteriaList

    proc = LogitsProcessor.from_model(llm, load_constraint(regex="[0-9]{4}"), max_tokens=16)
    out = llm.create_completion(
        "Pick a year:", max_tokens=16, logits_processor=LogitsProcessorList([proc]),
        stopping_criteria=StoppingCriteriaList([proc.raise_on_error]),
    )

llama-cpp-python calls the processor once per sampled token with every id evaluated so
far (prompt, then the output) and that step's logits row; the processor follows the ids
the model actually emitted and sets the row to -inf wherever the grammar forbids the
token (end-of-generation included, until the output is complete). Its own samplers
(penalties, top-k, top-p, temperature) run afterwards, on what is left.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

import numpy as np

from ministruct.decode.model import Model
from ministruct.engine.budget import output_budget
from ministruct.engine.compile import CompiledGrammar, compile_grammar
from ministruct.engine.matcher import Matcher
from ministruct.errors import MinistructError, NoLegalContinuation, TokenRejected, UsageError
from ministruct.grammar.constraint import Constraint
from ministruct.grammar.ir import Grammar

if TYPE_CHECKING:
    import numpy.typing as npt


class LogitsProcessor:
    """llama-cpp-python's logits-processor protocol for one compiled constraint:
    `processor(input_ids, scores) -> scores` with illegal tokens at -inf.

    One call of `create_completion` (or `generate`) is one generation. The processor
    notices a new one by its ids: ids that do not extend those of the last call (another
    prompt, or the same one again) start over, taking them as the prompt; ids that extend
    them are the tokens emitted since, which advance the grammar. `reset()` forgets the
    generation explicitly: call it before a prompt that extends the previous call's
    prompt and output (a chat continued), which would otherwise be read as emitted tokens.
    One instance follows one generation at a time: it is not safe to share between
    concurrent generations (make one per thread; the compiled grammar may be shared).

    `max_tokens`, when given, should be the `max_tokens` passed to `create_completion`:
    the legal set is then narrowed, near the end, to tokens after which a complete output
    plus the end-of-generation token still fit, so the generation stops with
    finish_reason "stop" instead of being cut ("length"). BudgetTooSmall (at
    construction) when not even the shortest output fits. Without it, nothing stops
    llama-cpp-python's own `max_tokens` (default 16) from cutting the output, nor its
    `stop` strings from ending it early: check the result (`complete`).

    Errors: the ids may hold a token the grammar forbids (another processor or a caller
    changed the choice): TokenRejected. No token is legal (the output cannot go on):
    NoLegalContinuation. A logits row of another width than the vocabulary's: UsageError.
    llama-cpp-python calls processors from a C callback, where an exception is printed
    and then ignored; so on an error the processor also leaves only end-of-generation
    legal (the generation stops), keeps the error in `error`, and `raise_on_error`, given
    as a stopping criterion, raises it from `create_completion` itself.

    A free-text-first constraint (`Constraint.think_first`) works as any other: the same
    exact masks across CLOSE; `think_tokens` is its thinking budget (engine/think.py) and
    `phase` says which part the generation is in.

    Not for speculative decoding (`draft_model`): llama-cpp-python then passes ids of
    draft tokens that have not been accepted yet.
    """

    def __init__(
        self, compiled: CompiledGrammar, *, max_tokens: int | None = None, think_tokens: int | None = None
    ) -> None:
        self.compiled = compiled
        self.matcher = Matcher(compiled, think_tokens=think_tokens)
        self.max_tokens = max_tokens
        self.error: MinistructError | None = None
        self._seen: np.ndarray | None = None  # the ids of the last call
        self._prompt_len = 0
        self._eog = np.asarray(sorted(compiled.vocab.eog_ids), dtype=np.int64)
        # the output, then end-of-generation: both within create_completion's max_tokens
        least = self.matcher.min_tokens_to_complete()
        self._budget = None if max_tokens is None else output_budget(least, max_tokens, end_token=True)

    @classmethod
    def from_model(
        cls,
        model: Any,
        constraint: Constraint | Grammar,
        *,
        max_tokens: int | None = None,
        think_tokens: int | None = None,
    ) -> "LogitsProcessor":
        """The processor for `constraint` on `model`: a ministruct Model or a
        `llama_cpp.Llama` (its vocabulary is read once; compiled masks are cached)."""
        if not isinstance(model, Model):
            model = Model.from_llama(model)
        if not isinstance(constraint, (Constraint, Grammar)):
            raise UsageError(
                f"constraint must be a Constraint or a Grammar, not {type(constraint).__name__}",
                parameter="constraint",
            )
        return cls(compile_grammar(constraint, model.vocabulary), max_tokens=max_tokens, think_tokens=think_tokens)

    # -- state ---------------------------------------------------------------

    @property
    def phase(self) -> str | None:
        """`think` or `answer` for a free-text-first constraint (None for any other)."""
        return self.matcher.phase

    @property
    def prompt_len(self) -> int:
        """How many ids the current generation started with (its prompt)."""
        return self._prompt_len

    @property
    def output_ids(self) -> list[int]:
        """The ids emitted so far in the current generation, as last seen."""
        return [] if self._seen is None else self._seen[self._prompt_len :].tolist()

    def reset(self) -> None:
        """Forget the current generation: the next call starts a new one."""
        self.matcher.reset()
        self.error = None
        self._seen = None
        self._prompt_len = 0

    # -- the protocol --------------------------------------------------------

    def __call__(self, input_ids: npt.NDArray[np.intc], scores: npt.NDArray[np.single]) -> npt.NDArray[np.single]:
        """Mask `scores` (in place, and returned) for the token after `input_ids`."""
        ids = np.asarray(input_ids).reshape(-1)
        try:
            n_logits = self.compiled.vocab.n_logits
            if len(scores) != n_logits:
                raise UsageError(
                    f"the logits row has {len(scores)} entries but the grammar was compiled for a "
                    f"vocabulary of {n_logits} ({self.compiled.vocab.name or 'unnamed'}): "
                    "was this processor built for another model?",
                    parameter="scores",
                )
            self._follow(ids)
            if self.error is not None:  # an earlier step of this generation failed
                raise self.error
            n_out = len(ids) - self._prompt_len
            remaining = None if self._budget is None else max(0, self._budget - n_out)
            mask = self.matcher.mask(remaining)
            if not mask.any():
                raise NoLegalContinuation(n_out, self.compiled.vocab.decode(self.output_ids))
        except MinistructError as e:
            self.error = e
            self._end_here(scores)
            raise
        scores[~mask] = -np.inf
        return scores

    def raise_on_error(self, input_ids: Any = None, logits: Any = None) -> bool:
        """A llama-cpp-python stopping criterion: raises the error the processor hit in
        this generation (if any), so it leaves `create_completion`; False otherwise."""
        if self.error is not None:
            raise self.error
        return False

    def _follow(self, ids: np.ndarray) -> None:
        """Start a generation at `ids`, or advance the matcher over the ids new since the
        last call."""
        seen = self._seen
        if seen is None or len(ids) <= len(seen) or not np.array_equal(ids[: len(seen)], seen):
            self.reset()
            self._prompt_len = len(ids)
            self._seen = ids.copy()
            return
        self._seen = ids.copy()
        if self.error is not None:
            return
        for i, token in enumerate(ids[len(seen) :].tolist(), start=len(seen) - self._prompt_len):
            try:
                self.matcher.advance(token)
            except TokenRejected as e:
                output = self.compiled.vocab.decode(ids[self._prompt_len : self._prompt_len + i].tolist())
                raise TokenRejected(
                    f"output token {i} was emitted against the grammar after {output!r}: {e} "
                    "(was the choice changed after this processor? or, for a new generation whose "
                    "prompt extends the last one, call reset() first)"
                ) from None

    def _end_here(self, scores: np.ndarray) -> None:
        """Leave only end-of-generation legal, so llama-cpp-python stops."""
        if len(scores) and len(self._eog):
            keep = self._eog[self._eog < len(scores)]
            saved = np.asarray(scores)[keep].copy()
            scores[:] = -np.inf
            scores[keep] = np.where(np.isfinite(saved), saved, 0.0)


__all__ = ["LogitsProcessor"]
