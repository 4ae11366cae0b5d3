"""Many sequences of one model in one llama.cpp context, one decode for all (Sequences)."""

from __future__ import annotations

import ctypes
from pathlib import Path
from typing import Any, Protocol, Sequence

import numpy as np

from ministruct.decode.gguf import llama_lib
from ministruct.decode.interrupt import Aborted, set_abort_callback
from ministruct.errors import ModelError


class SequencesModel(Protocol):
    """What Sequences reads of a decode/model.py Model (which makes Sequences, so is not
    imported here)."""

    path: Path
    batch_threads: int
    _llm: Any

    @property
    def n_logits(self) -> int: ...

    def _checked(self, tokens: Sequence[int]) -> list[int]: ...


class Sequences:
    """Up to `n_seq` token sequences in one llama.cpp context, each with its own part of
    the KV cache (sequence ids 0 .. n_seq-1, plus one more to keep a prompt for reuse),
    evaluated together: one `decode` runs every sequence's new tokens in one batch.

    A row computed in a batch with other sequences can differ in the last bits from the
    same row computed alone (as fast-forward's batch rows do)."""

    def __init__(self, model: SequencesModel, n_seq: int, n_ctx: int) -> None:
        if n_seq < 1:
            raise ModelError(f"n_seq must be >= 1, got {n_seq}")
        lib = llama_lib()
        llm = model._llm
        self.model = model
        self.n_seq = n_seq
        self.n_ctx = n_ctx  # per sequence
        self.store = n_seq  # the extra sequence, that keeps a prompt for reuse
        params = lib.llama_context_params()
        ctypes.pointer(params)[0] = llm.context_params  # type: ignore[attr-defined]  # a copy of the same settings
        streams = n_seq + 1
        params.n_ctx = n_ctx * streams
        params.n_batch = params.n_ubatch = max(512, min(2048, 64 * streams))
        params.n_seq_max = streams
        params.n_threads = params.n_threads_batch = model.batch_threads
        params.kv_unified = False  # each sequence attends over its own cells only
        ctx = lib.llama_init_from_model(llm.model, params)  # type: ignore[attr-defined]
        if not ctx:
            raise ModelError(f"{model.path}: cannot create a context for {n_seq} sequences of {n_ctx} tokens")
        self._ctx = ctx
        set_abort_callback(lib, ctx)  # (a batch's second signal stops an evaluation in progress)
        self._mem = lib.llama_get_memory(ctx)
        self.n_batch = int(params.n_batch)
        self._batch = lib.llama_batch_init(self.n_batch, 0, 1)
        self._n_past = [0] * streams

    def n_past(self, seq: int) -> int:
        return self._n_past[seq]

    def clear(self, seq: int) -> None:
        """Forget every token of sequence `seq`."""
        llama_lib().llama_memory_seq_rm(self._mem, seq, -1, -1)
        self._n_past[seq] = 0

    def clear_all(self) -> None:
        """Forget every sequence: the context is as freshly made (the same cells are
        taken again, so the same work gives the same rows)."""
        llama_lib().llama_memory_clear(self._mem, False)
        self._n_past = [0] * len(self._n_past)

    def copy(self, src: int, dst: int, keep: int | None = None) -> bool:
        """Make sequence `dst` hold what `src` holds (its KV cache copied, not recomputed),
        or only its first `keep` tokens. False when those cannot be kept whole (a
        recurrent model, or a sliding-window cache that has dropped early positions):
        then `dst` is empty."""
        lib = llama_lib()
        self.clear(dst)
        lib.llama_memory_seq_cp(self._mem, src, dst, -1, -1)
        self._n_past[dst] = self._n_past[src]
        if keep is None or keep >= self._n_past[src]:
            return True
        if (
            keep < 1
            or not lib.llama_memory_seq_rm(self._mem, dst, keep, -1)
            or lib.llama_memory_seq_pos_min(self._mem, dst) != 0
        ):
            self.clear(dst)
            return False
        self._n_past[dst] = keep
        return True

    def truncate(self, seq: int, n: int) -> bool:
        """Keep only the first `n` tokens of sequence `seq`; False when they cannot be kept
        (a recurrent model, a sliding-window cache): then `seq` is empty."""
        if n >= self._n_past[seq]:
            return True
        lib = llama_lib()
        if (
            n < 1
            or not lib.llama_memory_seq_rm(self._mem, seq, n, -1)
            or lib.llama_memory_seq_pos_min(self._mem, seq) != 0
        ):
            self.clear(seq)
            return False
        self._n_past[seq] = n
        return True

    def decode(self, work: Sequence[tuple[int, Sequence[int], int]]) -> list[np.ndarray]:
        """Append tokens to sequences and run them in as few batches as n_batch allows. For
        each (sequence id, tokens, n_rows) of `work`: the logits rows after its last `n_rows`
        tokens (float32, n_rows x n_logits; row i predicts the token after the i-th)."""
        lib = llama_lib()
        flat: list[tuple[int, int, int, bool]] = []
        for seq, tokens, n_rows in work:
            toks = self.model._checked(tokens) if tokens else []
            start = self._n_past[seq]
            if start + len(toks) > self.n_ctx:
                raise ModelError(
                    f"{self.model.path}: context full: {start} + {len(toks)} tokens exceed n_ctx={self.n_ctx}"
                )
            first_row = len(toks) - n_rows
            flat.extend((seq, start + i, t, i >= first_row) for i, t in enumerate(toks))
            self._n_past[seq] = start + len(toks)
        out = [np.empty((n_rows, self.model.n_logits), dtype=np.float32) for _, _, n_rows in work]
        owners = [i for i, (_, tokens, n_rows) in enumerate(work) for _ in range(min(n_rows, len(tokens)))]
        k, filled = 0, [0] * len(work)
        b = self._batch
        for at in range(0, len(flat), self.n_batch):
            chunk = flat[at : at + self.n_batch]
            n_out = 0
            for i, (seq, pos, tok, want) in enumerate(chunk):
                b.token[i] = tok
                b.pos[i] = pos
                b.n_seq_id[i] = 1
                b.seq_id[i][0] = seq
                b.logits[i] = want
                n_out += want
            b.n_tokens = len(chunk)
            rc = lib.llama_decode(self._ctx, b)
            if rc == 2:  # aborted: a batch's second signal (decode/interrupt.py)
                raise Aborted()
            if rc != 0:
                raise ModelError(f"{self.model.path}: batched evaluation failed (llama_decode returned {rc})")
            if n_out:
                ptr = lib.llama_get_logits(self._ctx)
                rows = np.ctypeslib.as_array(ptr, shape=(n_out, self.model.n_logits))
                for r in range(n_out):
                    w = owners[k]
                    out[w][filled[w]] = rows[r]
                    filled[w] += 1
                    k += 1
        return out

    def close(self) -> None:
        """Free the context (the model stays loaded)."""
        lib = llama_lib()
        if self._ctx:
            lib.llama_batch_free(self._batch)
            lib.llama_free(self._ctx)
            self._ctx = None

    def __enter__(self) -> "Sequences":
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
