"""Matcher: one generation's walk through a CompiledGrammar.

Cheap to create and to fork: it holds only the history of configuration ids;
everything expensive lives in the shared CompiledGrammar.
"""

from __future__ import annotations

import numpy as np

from ministruct.engine.budget import INF, budget_for
from ministruct.engine.compile import DEAD, CompiledGrammar
from ministruct.engine.forced import forced_for
from ministruct.errors import TokenRejected


class Matcher:
    """mask() for the next token, advance(token), is_accepting(), reset(), rollback(n), fork()."""

    def __init__(self, compiled: CompiledGrammar) -> None:
        self.compiled = compiled
        self._history: list[int] = [compiled.initial]
        self._ended = False

    @property
    def state(self) -> int:
        return self._history[-1]

    @property
    def n_tokens(self) -> int:
        """Tokens accepted since the start (an end-of-generation token counts)."""
        return len(self._history) - 1 + int(self._ended)

    def reset(self) -> None:
        self._history = [self.compiled.initial]
        self._ended = False

    def fork(self) -> "Matcher":
        m = Matcher.__new__(Matcher)
        m.compiled = self.compiled
        m._history = list(self._history)
        m._ended = self._ended
        return m

    def mask(self, remaining: int | None = None) -> np.ndarray:
        """Read-only bool array over the logits rows: True where the token is legal next.

        With `remaining` (tokens left, this one included), only tokens after which a
        completion is guaranteed to fit in the rest (engine/budget.py).
        """
        if self._ended:
            return np.zeros(self.compiled.vocab.n_logits, dtype=bool)
        mask = self.compiled.mask(self.state)
        if remaining is None:
            return mask
        return budget_for(self.compiled).narrow(self.state, mask, remaining)

    def mask_ready(self, remaining: int | None = None) -> bool:
        """Is the next mask already computed (so mask() is a lookup)?"""
        if self._ended:
            return True
        ready = self.compiled.has_mask(self.state)
        if remaining is not None and ready:
            ready = budget_for(self.compiled).has_need(self.state)
        return ready

    def min_tokens_to_complete(self) -> int | None:
        """An upper bound on the fewest tokens that complete the output from here
        (one token per byte); None when it cannot be completed."""
        if self._ended:
            return 0
        cost = budget_for(self.compiled).config_cost(self.state)
        return None if cost >= INF else cost

    def forced_bytes(self) -> bytes:
        """The bytes the grammar dictates next (engine/forced.py): b"" when the next byte
        is a choice, the output may end here, or generation has ended."""
        if self._ended:
            return b""
        return forced_for(self.compiled).forced(self.state)

    def is_legal(self, token_id: int) -> bool:
        if self._ended:
            return False
        if token_id in self.compiled.vocab.eog_ids:
            return self.is_accepting()
        return self.compiled.step_token(self.state, token_id) != DEAD

    def advance(self, token_id: int) -> None:
        """Accept one token; TokenRejected if it is not legal here."""
        if self._ended:
            raise TokenRejected(f"token {token_id} after the end of generation")
        if token_id in self.compiled.vocab.eog_ids:
            if not self.is_accepting():
                raise TokenRejected(f"end-of-generation token {token_id} before the output is complete")
            self._ended = True
            return
        nxt = self.compiled.step_token(self.state, token_id)
        if nxt == DEAD:
            raise TokenRejected(f"token {token_id} ({self.compiled.vocab.piece(token_id)!r}) is not allowed here")
        self._history.append(nxt)

    def rollback(self, n: int) -> None:
        """Undo the last n accepted tokens."""
        if n < 0 or n > self.n_tokens:
            raise ValueError(f"cannot roll back {n} of {self.n_tokens} tokens")
        if n and self._ended:
            self._ended = False
            n -= 1
        if n:
            del self._history[-n:]

    def is_accepting(self) -> bool:
        """Is the output so far a complete string of the language?"""
        return self.compiled.is_accepting(self.state)

    def is_terminated(self) -> bool:
        """Complete, with nothing but end-of-generation possible next (or already ended)."""
        return self._ended or self.compiled.is_terminated(self.state)
