"""A loaded model (Model): load, tokenize, apply the chat template, evaluate tokens one
batch at a time and hand back a copy of the last logits row; `sequences()` evaluates many
sequences in one context (sequences.py). llama.cpp itself is reached through gguf.py.
Sampling is never delegated to llama.cpp.
"""

from __future__ import annotations

import ctypes
import os
import threading
from pathlib import Path
from typing import Any, Sequence

import numpy as np

from ministruct.decode.gguf import cached_vocabulary, check_gguf, default_model_path, llama_lib
from ministruct.decode.sequences import Sequences
from ministruct.engine.vocab import Vocabulary
from ministruct.errors import ModelError


class Model:
    """A loaded GGUF model with its own evaluation state (one sequence)."""

    def __init__(
        self,
        llama: object,
        path: Path,
        *,
        vocab_only: bool,
        batch_threads: int | None = None,
    ) -> None:
        self._llm = llama
        self.path = path
        self.vocab_only = vocab_only
        self.batch_threads = batch_threads or 1  # for sequences()
        lib = llama_lib()
        self._vocab_p = lib.llama_model_get_vocab(llama.model)  # type: ignore[attr-defined]
        self._n_logits = int(lib.llama_vocab_n_tokens(self._vocab_p))
        self._tokens: list[int] = []
        self._prefilled: tuple[list[int], np.ndarray] | None = None  # last prompt + its logits
        self._restored: np.ndarray | None = None  # logits row restored by prefill()
        self._vocabulary: Vocabulary | None = None
        self._template = None

    # -- loading -------------------------------------------------------------

    @classmethod
    def load(
        cls,
        path: str | os.PathLike[str] | None = None,
        *,
        n_ctx: int = 2048,
        vocab_only: bool = False,
        seed: int = 0,
        n_threads: int | None = None,
        batch_threads: int | None = None,
    ) -> "Model":
        """Load a GGUF model (default: default_model_path()); ModelError on any failure.

        One sequence runs on `n_threads` threads (default half the cores, as
        llama-cpp-python's), its prompt batches too: llama-cpp-python's default of every
        core for batches makes llama.cpp's thread barriers spin whenever another process
        holds a core, and a 13-token batch then took 3 s instead of 0.3 s on a busy 2-core
        machine. Batched decoding of many sequences (`sequences()`) runs on `batch_threads`
        (default `n_threads`). On an idle 2-core machine 2 threads gave batches of 16
        sequences 2.65x the tokens/s of one sequence (1 thread: 1.64x), but whenever
        another process held a core, 2 threads ran 4x slower than 1: every core is worth
        asking for only on a machine that is otherwise idle."""
        p = Path(path).expanduser() if path is not None else default_model_path()
        check_gguf(p)
        lib = llama_lib()
        threads = n_threads or max(1, (os.cpu_count() or 2) // 2)
        try:
            llm = lib.Llama(
                model_path=str(p),
                n_ctx=n_ctx,
                vocab_only=vocab_only,
                seed=seed,
                n_threads=threads,
                n_threads_batch=threads,
                verbose=False,
            )
        except Exception as e:  # llama_cpp raises ValueError/RuntimeError/OSError
            msg = " ".join(str(e).split()) or type(e).__name__
            raise ModelError(f"{p}: cannot load model: {msg}") from None
        return cls(llm, p, vocab_only=vocab_only, batch_threads=batch_threads or threads)

    @classmethod
    def load_in_background(cls, path: str | os.PathLike[str] | None = None, **options: Any) -> "ModelLoading":
        """`load(path, **options)` started on another thread: llama.cpp reads the weights
        while the caller does its own start-up (the constraint, imports); `.result()` waits."""
        return ModelLoading(cls, path, options)

    @classmethod
    def from_llama(cls, llama: object) -> "Model":
        """Wrap a `llama_cpp.Llama` loaded elsewhere (ModelError when it is not one)."""
        path = getattr(llama, "model_path", None)
        params = getattr(llama, "model_params", None)
        if path is None or params is None or not callable(getattr(llama, "create_completion", None)):
            raise ModelError(f"expected a llama_cpp.Llama, not {type(llama).__name__}")
        return cls(llama, Path(path), vocab_only=bool(params.vocab_only))

    # -- properties ----------------------------------------------------------

    @property
    def llama(self):
        """The underlying `llama_cpp.Llama`, to drive it directly (`create_completion`
        with a `LogitsProcessor`). Its context is this Model's too: handing it out makes
        this Model forget what it evaluated, so its next prompt is evaluated afresh."""
        self.reset()
        return self._llm

    @property
    def name(self) -> str:
        """general.name from the GGUF metadata, else the file name."""
        meta = self.metadata
        return meta.get("general.name") or self.path.name

    @property
    def metadata(self) -> dict[str, str]:
        return dict(getattr(self._llm, "metadata", {}) or {})

    @property
    def n_ctx(self) -> int:
        """Usable context length (llama.cpp may pad its own; Llama's buffers are n_ctx)."""
        llm = self._llm
        return min(int(llm.n_ctx()), len(llm.input_ids))  # type: ignore[attr-defined]

    @property
    def n_logits(self) -> int:
        """Width of a logits row."""
        return self._n_logits

    @property
    def n_past(self) -> int:
        """How many tokens the context currently holds."""
        return len(self._tokens)

    @property
    def evaluated(self) -> list[int]:
        return list(self._tokens)

    @property
    def vocabulary(self) -> Vocabulary:
        """Every token's exact bytes plus control/EOG ids (built once, then cached)."""
        if self._vocabulary is None:
            self._vocabulary = cached_vocabulary(self.path, self._vocab_p, self.name)
        return self._vocabulary

    def tokenize(self, text: str, *, add_bos: bool, special: bool) -> list[int]:
        """Token ids of `text`; `special` parses control-token text like <|im_end|>."""
        try:
            return list(self._llm.tokenize(text.encode("utf-8"), add_bos=add_bos, special=special))  # type: ignore[attr-defined]
        except RuntimeError as e:
            raise ModelError(f"{self.path}: cannot tokenize: {e}") from None

    def tokenize_bytes(self, data: bytes) -> list[int]:
        """Token ids of raw bytes as the tokenizer splits them (no BOS, control text not
        parsed); the bytes need not be valid UTF-8."""
        if not data:
            return []
        try:
            return list(self._llm.tokenize(bytes(data), add_bos=False, special=False))  # type: ignore[attr-defined]
        except RuntimeError as e:
            raise ModelError(f"{self.path}: cannot tokenize: {e}") from None

    def detokenize(self, ids: Sequence[int]) -> bytes:
        """The output bytes of `ids` (control tokens add nothing)."""
        return self.vocabulary.decode(ids)

    @property
    def chat_template(self) -> str | None:
        """The chat template: one given with `use_chat_template`, else the GGUF's
        (`tokenizer.chat_template`)."""
        override = getattr(self, "_template_override", None)
        return override if override is not None else self.metadata.get("tokenizer.chat_template")

    def use_chat_template(self, template: str) -> None:
        """Format prompts (and read tool and think markup) with `template` instead of the GGUF's."""
        self._template_override = template
        self._template = None

    def format_prompt(self, prompt: str, *, chat: bool, system: str | None = None) -> str:
        """The prompt text: as is (raw), or wrapped in the model's chat template."""
        if not chat:
            return prompt if system is None else f"{system}\n\n{prompt}"
        messages = []
        if system is not None:
            messages.append({"role": "system", "content": system})
        messages.append({"role": "user", "content": prompt})
        template = self.chat_template
        if not template:
            return self._builtin_template(messages)
        vocab = self.vocabulary
        lib = llama_lib()
        bos = vocab.control_text.get(int(lib.llama_vocab_bos(self._vocab_p)), "")
        eos = vocab.control_text.get(int(lib.llama_vocab_eos(self._vocab_p)), "")
        try:
            return self._compiled_template(template).render(
                messages=messages,
                add_generation_prompt=True,
                bos_token=bos,
                eos_token=eos,
            )
        except Exception as e:
            msg = " ".join(str(e).split())
            raise ModelError(f"{self.path}: cannot apply the chat template: {msg}") from None

    def encode_prompt(self, prompt: str, *, chat: bool, system: str | None = None) -> list[int]:
        """Prompt token ids: format_prompt, then tokenize (control text parsed only in chat
        mode; BOS added when the model wants one and the template did not write it)."""
        text = self.format_prompt(prompt, chat=chat, system=system)
        bos_id = int(llama_lib().llama_vocab_bos(self._vocab_p))
        bos_text = self.vocabulary.control_text.get(bos_id)
        add_bos = not (chat and bos_text and text.startswith(bos_text))
        ids = self.tokenize(text, add_bos=add_bos, special=chat)
        if not ids:
            raise ModelError("the prompt is empty (no tokens)")
        return ids

    def _builtin_template(self, messages: list[dict[str, str]]) -> str:
        """No template in the GGUF: llama.cpp's built-in one named after the architecture."""
        lib = llama_lib()
        arch = self.metadata.get("general.architecture", "")
        names = [n for n in dict.fromkeys([arch, arch.rstrip("0123456789")]) if n]
        chat = (lib.llama_chat_message * len(messages))(
            *[lib.llama_chat_message(m["role"].encode(), m["content"].encode()) for m in messages]
        )
        for name in names:
            size = 4096 + 2 * sum(len(m["content"]) for m in messages)
            for _ in range(2):
                buf = ctypes.create_string_buffer(size)
                n = lib.llama_chat_apply_template(name.encode(), chat, len(messages), True, buf, size)
                if n < 0:
                    break
                if n <= size:
                    return buf.raw[:n].decode("utf-8")
                size = n + 1
        raise ModelError(f"{self.path}: the model has no chat template; use chat=False")

    def _compiled_template(self, template: str):
        if self._template is None:
            from ministruct.grammar.chat_template import compiled

            self._template = compiled(template)
        return self._template

    # -- evaluation ----------------------------------------------------------

    def _require_weights(self) -> None:
        if self.vocab_only:
            raise ModelError(f"{self.path}: loaded with vocab_only; cannot evaluate")

    def reset(self) -> None:
        """Forget every evaluated token."""
        self._llm.reset()  # type: ignore[attr-defined]
        self._tokens = []
        self._prefilled = None
        self._restored = None

    def eval(self, tokens: Sequence[int]) -> None:
        """Append `tokens` to the context and run the model over them (one batch)."""
        self._require_weights()
        tokens = self._checked(tokens)
        if not tokens:
            return
        llm = self._llm
        # Llama.eval first drops every cached position >= n_tokens from the KV cache
        llm.n_tokens = len(self._tokens)  # type: ignore[attr-defined]
        self._restored = None
        try:
            llm.eval(tokens)  # type: ignore[attr-defined]
        except Exception as e:
            self.reset()
            raise ModelError(f"{self.path}: evaluation failed: {e}") from None
        self._tokens.extend(tokens)

    def eval_rows(self, tokens: Sequence[int]) -> np.ndarray:
        """Append `tokens` and run the model over them in one batch, returning the logits
        row after every one of them (float32, len(tokens) x n_logits; row i predicts the
        token after tokens[i]). The last row is also what `logits()` gives afterwards.

        llama.cpp computes a batch's rows together, so they can differ in the last bits
        from rows computed one token at a time (benchmarks/fast_forward.py measures it).
        """
        self._require_weights()
        tokens = self._checked(tokens)
        if not tokens:
            return np.zeros((0, self.n_logits), dtype=np.float32)
        lib = llama_lib()
        llm = self._llm
        rows = np.empty((len(tokens), self.n_logits), dtype=np.float32)
        n_batch = max(1, int(getattr(llm, "n_batch", 512)))
        self._restored = None
        try:
            # drop every cached position past what this object holds, as Llama.eval does
            llm.n_tokens = len(self._tokens)  # type: ignore[attr-defined]
            llm._ctx.kv_cache_seq_rm(-1, llm.n_tokens, -1)  # type: ignore[attr-defined]
            for start in range(0, len(tokens), n_batch):
                chunk = tokens[start : start + n_batch]
                n_past = int(llm.n_tokens)  # type: ignore[attr-defined]
                llm._batch.set_batch(batch=chunk, n_past=n_past, logits_all=True)  # type: ignore[attr-defined]
                llm._ctx.decode(llm._batch)  # type: ignore[attr-defined]
                for i in range(len(chunk)):
                    ptr = lib.llama_get_logits_ith(llm.ctx, i)  # type: ignore[attr-defined]
                    if not ptr:
                        raise RuntimeError("llama.cpp returned no logits for a batch row")
                    rows[start + i] = np.ctypeslib.as_array(ptr, shape=(self.n_logits,))
                llm.input_ids[n_past : n_past + len(chunk)] = chunk  # type: ignore[attr-defined]
                llm.n_tokens = n_past + len(chunk)  # type: ignore[attr-defined]
                self._tokens.extend(chunk)
        except Exception as e:
            self.reset()
            raise ModelError(f"{self.path}: evaluation failed: {e}") from None
        return rows

    def _checked(self, tokens: Sequence[int]) -> list[int]:
        """`tokens` as ints; ModelError when they do not fit the context or the vocabulary."""
        tokens = [int(t) for t in tokens]
        if len(self._tokens) + len(tokens) > self.n_ctx:
            raise ModelError(
                f"{self.path}: context full: {len(self._tokens)} + {len(tokens)} tokens exceed n_ctx={self.n_ctx}"
            )
        n_logits = self.n_logits
        bad = [t for t in tokens if not 0 <= t < n_logits]
        if bad:
            raise ModelError(f"{self.path}: token id {bad[0]} out of range [0, {n_logits})")
        return tokens

    def prefill(self, tokens: Sequence[int]) -> int:
        """Make the context hold exactly `tokens` (a prompt); return how many were reused.

        llama.cpp's logits depend on how tokens were batched, so a prompt is only
        reused when it was itself the last prefill: its KV cache is kept, extra
        positions are dropped and its saved logits row is restored. The result is
        then bit-for-bit what a fresh prefill gives. Otherwise the context is reset
        and the prompt evaluated as one batch.
        """
        tokens = [int(t) for t in tokens]
        if not tokens:
            raise ModelError("cannot evaluate an empty prompt")
        saved = self._prefilled
        if saved is not None and saved[0] == tokens and self._tokens[: len(tokens)] == tokens:
            self._tokens = list(tokens)
            self._restored = saved[1]
            return len(tokens)
        self.reset()
        self.eval(tokens)
        self._prefilled = (list(tokens), self.logits())
        return 0

    def logits(self) -> np.ndarray:
        """A float32 copy of the logits row after the last evaluated token."""
        self._require_weights()
        if not self._tokens:
            raise ModelError("no logits: nothing has been evaluated")
        if self._restored is not None:
            return self._restored.copy()
        lib = llama_lib()
        ptr = lib.llama_get_logits_ith(self._llm.ctx, -1)  # type: ignore[attr-defined]
        if not ptr:
            raise ModelError(f"{self.path}: llama.cpp returned no logits")
        row = np.ctypeslib.as_array(ptr, shape=(self.n_logits,))
        return np.array(row, dtype=np.float32, copy=True)

    def sequences(self, n_seq: int, n_ctx: int | None = None) -> Sequences:
        """A context of its own holding up to `n_seq` sequences of `n_ctx` tokens each
        (default this Model's n_ctx), evaluated together (batched decoding) on
        `batch_threads` threads."""
        self._require_weights()
        return Sequences(self, n_seq, n_ctx or self.n_ctx)

    def close(self) -> None:
        """Free the llama.cpp model and context."""
        close = getattr(self._llm, "close", None)
        if close is not None:
            close()

    def __repr__(self) -> str:
        return f"Model({str(self.path)!r}, n_ctx={self.n_ctx}, n_logits={self.n_logits})"


class ModelLoading:
    """A Model.load running on its own thread (Model.load_in_background).

    While it runs, llama-cpp-python points file descriptors 1 and 2 at /dev/null (its
    quiet load), so the caller must write nothing until `result()` or `wait()` returns:
    a warning or an error printed meanwhile would be lost."""

    def __init__(self, model_class: type[Model], path: str | os.PathLike[str] | None, options: dict) -> None:
        self._model: Model | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(
            target=self._run, args=(model_class, path, options), name="ministruct-model-load", daemon=True
        )
        self._thread.start()

    def _run(self, model_class: type[Model], path: str | os.PathLike[str] | None, options: dict) -> None:
        try:
            self._model = model_class.load(path, **options)
        except BaseException as e:  # handed to the caller by result()
            self._error = e

    def wait(self) -> None:
        """Until the load has ended (its outcome kept for `result()`)."""
        self._thread.join()

    def result(self) -> Model:
        """The loaded Model, or the load's error (ModelError) raised here."""
        self.wait()
        if self._error is not None:
            raise self._error
        assert self._model is not None
        return self._model
