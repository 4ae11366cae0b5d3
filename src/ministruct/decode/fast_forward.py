"""Fast-forward (issue 11): where the grammar dictates the next bytes, evaluate them in one batch.

When the constraint admits exactly one byte continuation from the current configuration
(`Matcher.forced_bytes()`), the decoder need not ask the model for those bytes one token
at a time. `plan` turns them into tokens the way the model's own tokenizer splits them,
checks every token against the matcher (and the token budget), and, before a stretch
that a choice follows, looks at the last token of the split: where a token starting at
it or inside it can run past the stretch's end (the stretch's bytes merged with what
comes next: `Matcher.crosses`), that boundary token stays the model's choice; where none
can (the usual case: byte-level BPE keeps punctuation apart from letters), the output
breaks there whatever the model picks, and the last token is dictated too. The decoder
(decode/loop.py) then runs the planned tokens through the model in one batch, which
hands back the logits row before every one of them, and yields a Step for each
(`Step.fast_forward`), with its legal set, as for any other token.

A stretch whose tokenizer split is not legal for the matcher (or does not spell the
bytes) is not fast-forwarded: the decoder falls back to one sampled step per token.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol, Sequence, runtime_checkable

import numpy as np

if TYPE_CHECKING:
    from ministruct.engine.vocab import Vocabulary

MIN_FORCED_BYTES = 1  # a single byte too: its token joins the batch of the token before it


@runtime_checkable
class ForcingMatcher(Protocol):
    """What fast-forward needs from a matcher beyond the decoder's TokenMatcher."""

    def forced_bytes(self) -> bytes: ...
    def fork(self) -> Any: ...
    def rollback(self, n: int) -> None: ...
    def crosses(self, data: bytes) -> bool: ...
    def is_legal(self, token_id: int) -> bool: ...
    def advance(self, token_id: int) -> None: ...
    def is_terminated(self) -> bool: ...
    def min_tokens_to_complete(self) -> int | None: ...


@runtime_checkable
class BatchModel(Protocol):
    """What fast-forward needs from a model beyond eval/logits (model.Model fits)."""

    vocabulary: "Vocabulary"

    def tokenize_bytes(self, data: bytes) -> list[int]: ...
    def eval_rows(self, tokens: Sequence[int]) -> np.ndarray: ...


def supported(model: object, matcher: object) -> bool:
    """Can this model and matcher fast-forward at all?"""
    return matcher is not None and isinstance(matcher, ForcingMatcher) and isinstance(model, BatchModel)


def plan(model: BatchModel, matcher: ForcingMatcher, remaining: int, *, budget_aware: bool) -> tuple[list[int], bool]:
    """(tokens to fast-forward from the matcher's configuration, whether the grammar is
    done after them). No tokens: decode this step as usual.

    At most `remaining` tokens; with `budget_aware`, only tokens after which a complete
    output still fits in the budget (the decoder's narrowing would keep them)."""
    data = matcher.forced_bytes()
    if len(data) < MIN_FORCED_BYTES or remaining <= 0:
        return [], False
    ids = model.tokenize_bytes(data)
    vocab = model.vocabulary
    if not ids or b"".join(vocab.token_bytes(t) for t in ids) != data:
        return [], False  # the tokenizer does not spell the bytes back (a prefix space, ...)
    probe = matcher.fork()
    taken: list[int] = []
    for i, t in enumerate(ids[:remaining]):
        if not probe.is_legal(t):
            break
        probe.advance(t)
        if budget_aware:
            # the decoder's narrowing keeps exactly the tokens that pass this; with today's
            # one-token-per-byte bound a dictated token always does, but a sharper bound
            # (engine/budget.py) must not let fast-forward break the budget
            least = probe.min_tokens_to_complete()
            if least is None or least > remaining - i - 1:
                break
        taken.append(int(t))
    whole = len(taken) == len(ids)
    done = whole and probe.is_terminated()
    if whole and not done:
        probe.rollback(1)
        if probe.crosses(vocab.token_bytes(taken[-1])):
            taken.pop()  # a token may span the stretch's end: the boundary token is the model's to choose
    return taken, done and bool(taken)


__all__ = ["MIN_FORCED_BYTES", "ForcingMatcher", "BatchModel", "supported", "plan"]
