"""Matcher: one generation's walk through a CompiledGrammar.

Cheap to create and to fork: it holds only the history of configuration ids (and, for a
free-text-first grammar, of phase states: engine/think.py); everything expensive lives
in the shared CompiledGrammar.
"""

from __future__ import annotations

import numpy as np

from ministruct.engine.budget import INF, budget_for
from ministruct.engine.compile import DEAD, CompiledGrammar
from ministruct.engine.forced import forced_for
from ministruct.engine.think import THINK, PhaseState, boundaries_for
from ministruct.errors import TokenRejected, UsageError


class Matcher:
    """mask() for the next token, advance(token), is_accepting(), reset(), rollback(n), fork().

    For a free-text-first grammar, `phase` says which part the output is in and
    `think_tokens` (None: no limit) is the thinking budget: once that many tokens are
    spent in the thinking, only tokens that move toward CLOSE are legal and the rest of
    CLOSE is forced (engine/think.py)."""

    def __init__(self, compiled: CompiledGrammar, *, think_tokens: int | None = None) -> None:
        self.compiled = compiled
        self._history: list[int] = [compiled.initial]
        self._ended = False
        self._bounds = boundaries_for(compiled)
        if think_tokens is not None and think_tokens < 0:
            raise UsageError(f"think_tokens must be >= 0, got {think_tokens}", parameter="think_tokens")
        if think_tokens is not None and self._bounds is None:
            raise UsageError("think_tokens needs a grammar that starts with free text", parameter="think_tokens")
        self.think_tokens = think_tokens
        self._phases: list[PhaseState] = [PhaseState()] if self._bounds is not None else []
        self._closing = False  # the overall budget narrowed the thinking's last mask

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
        if self._bounds is not None:
            self._phases = [PhaseState()]
        self._closing = False

    def fork(self) -> "Matcher":
        m = Matcher.__new__(Matcher)
        m.compiled = self.compiled
        m._history = list(self._history)
        m._ended = self._ended
        m._bounds = self._bounds
        m.think_tokens = self.think_tokens
        m._phases = list(self._phases)
        m._closing = self._closing
        return m

    # ------------------------------------------------------------ phases

    @property
    def phase(self) -> str | None:
        """`think` or `answer` for a free-text-first grammar (None for any other)."""
        return self._phases[-1].phase if self._phases else None

    @property
    def phase_state(self) -> PhaseState | None:
        """Thinking tokens spent, where the answer starts, how the thinking ended."""
        return self._phases[-1] if self._phases else None

    def think_spent(self) -> bool:
        """In the thinking, with its token budget used up."""
        st = self.phase_state
        return (
            st is not None
            and st.phase == THINK
            and self.think_tokens is not None
            and st.think_tokens >= self.think_tokens
        )

    def mask(self, remaining: int | None = None) -> np.ndarray:
        """Read-only bool array over the logits rows: True where the token is legal next.

        With `remaining` (tokens left, this one included), only tokens after which a
        completion is guaranteed to fit in the rest (engine/budget.py).
        """
        if remaining is not None and remaining < 0:
            raise UsageError(f"remaining must be >= 0, got {remaining}", parameter="remaining")
        if self._ended:
            return np.zeros(self.compiled.vocab.n_logits, dtype=bool)
        mask = self.compiled.mask(self._history[-1])
        if self._phases and self.think_spent():
            mask = self._bounds.narrow_spent(self.state, self._phases[-1].matched, mask)  # type: ignore[union-attr]
        if remaining is None:
            return mask
        narrowed = budget_for(self.compiled).narrow(self.state, mask, remaining)
        if narrowed is not mask and self.phase == THINK:
            self._closing = True
        return narrowed

    def mask_ready(self, remaining: int | None = None) -> bool:
        """Is the next mask already computed (so mask() is a lookup)?"""
        if self._ended:
            return True
        if self.think_spent():
            return False
        ready = self.compiled.has_mask(self.state)
        if remaining is not None and ready:
            ready = budget_for(self.compiled).ready(self.state, remaining)
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
        if self.think_spent():
            return self._bounds.forced_spent(self.state, self._phases[-1].matched)  # type: ignore[union-attr]
        return forced_for(self.compiled).forced(self.state)

    def crosses(self, data: bytes) -> bool:
        """Whether a token that starts inside the legal bytes `data` (at their start, or
        after some of them) can run past their end: then the end of `data` need not fall
        between two tokens. Asked of the grammar alone (a thinking budget only narrows)."""
        if self._ended:
            return False
        compiled = self.compiled
        lengths = compiled.vocab.lengths
        n = min(len(lengths), compiled.vocab.n_logits)
        for at in range(len(data)):
            cid = self.state if at == 0 else compiled.step_bytes(self.state, data[:at])
            if cid != DEAD and np.any(compiled.mask(cid)[:n] & (lengths[:n] > len(data) - at)):
                return True
        return False

    def is_legal(self, token_id: int) -> bool:
        if self._ended:
            return False
        if token_id in self.compiled.vocab.eog_ids:
            return self.is_accepting()
        if self.think_spent():
            return bool(self.mask()[token_id])
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
        if nxt == DEAD or (self.think_spent() and not self.mask()[token_id]):
            raise TokenRejected(f"token {token_id} ({self.compiled.vocab.piece(token_id)!r}) is not allowed here")
        self._history.append(nxt)
        if self._bounds is not None:
            closing = self.think_spent() or self._closing
            data = self.compiled.vocab.token_bytes(token_id)
            self._phases.append(self._bounds.step(self._phases[-1], token_id, data, closing))
            self._closing = False

    def rollback(self, n: int) -> None:
        """Undo the last n accepted tokens."""
        if n < 0 or n > self.n_tokens:
            raise UsageError(f"cannot roll back {n} of {self.n_tokens} tokens", parameter="n")
        if n and self._ended:
            self._ended = False
            n -= 1
        if n:
            del self._history[-n:]
            if self._phases:
                del self._phases[-n:]

    def positions(self, pieces: "list[bytes]") -> list:
        """Grammar positions of each token's bytes from the start (engine/positions.py):
        per token, [(Position, n_bytes), ...]."""
        from ministruct.engine.positions import PositionReader

        return PositionReader(self.compiled.automaton).of_tokens(pieces)

    def is_accepting(self) -> bool:
        """Is the output so far a complete string of the language?"""
        return self.compiled.is_accepting(self.state)

    def is_terminated(self) -> bool:
        """Complete, with nothing but end-of-generation possible next (or already ended)."""
        return self._ended or self.compiled.is_terminated(self.state)
