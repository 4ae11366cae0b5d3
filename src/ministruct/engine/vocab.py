"""Vocabulary: every token's exact bytes, which ids are special, and the logits width.

Independent of llama_cpp: decode/gguf.py builds one from a GGUF model, tests build one
from a list of byte strings.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass, field
from functools import cached_property, lru_cache
from pathlib import Path
from typing import Iterable, Iterator, Sequence, overload

import numpy as np


class PackedTokens(Sequence[bytes]):
    """Token byte strings stored as one buffer and their lengths: the vocabulary read
    back from the disk cache, without building 262k bytes objects in every process."""

    __slots__ = ("_data", "_ends", "lengths")

    def __init__(self, data: bytes, lengths: np.ndarray) -> None:
        self._data = data
        self.lengths = np.asarray(lengths, dtype=np.int64)
        ends = np.zeros(len(self.lengths) + 1, dtype=np.int64)
        np.cumsum(self.lengths, out=ends[1:])
        self._ends = ends.tolist()

    def __len__(self) -> int:
        return len(self._ends) - 1

    @overload
    def __getitem__(self, i: int) -> bytes: ...
    @overload
    def __getitem__(self, i: slice) -> list[bytes]: ...
    def __getitem__(self, i: int | slice) -> bytes | list[bytes]:
        if isinstance(i, slice):
            return [self[j] for j in range(*i.indices(len(self)))]
        i = int(i)
        if i < 0:
            i += len(self)
        if not 0 <= i < len(self):
            raise IndexError("token id out of range")
        return self._data[self._ends[i] : self._ends[i + 1]]

    def __iter__(self) -> Iterator[bytes]:
        data, ends = self._data, self._ends
        for k in range(len(ends) - 1):
            yield data[ends[k] : ends[k + 1]]

    def joined(self) -> bytes:
        return self._data


@dataclass(frozen=True, eq=False)
class Vocabulary:
    """Token bytes by id plus the ids that are not ordinary text.

    - `tokens[i]`: the bytes token i adds to the output (control tokens: b"").
    - `control_ids`: control/special tokens; never legal unless a grammar names them.
    - `eog_ids`: end-of-generation ids (legal exactly when the output is complete).
    - `control_text`: id -> the visible text of a control token (`<|im_end|>`).
    - `n_logits`: rows of the logits vector (>= len(tokens); extra rows are padding).
    """

    tokens: Sequence[bytes]
    control_ids: frozenset[int] = frozenset()
    eog_ids: frozenset[int] = frozenset()
    control_text: dict[int, str] = field(default_factory=dict)
    n_logits: int = 0
    name: str = ""

    def __post_init__(self) -> None:
        n = len(self.tokens)
        if self.n_logits < n:
            object.__setattr__(self, "n_logits", n)
        bad = [i for i in self.control_ids | self.eog_ids if not 0 <= i < n]
        if bad:
            raise ValueError(f"special ids out of range: {sorted(bad)[:5]}")

    @classmethod
    def from_bytes(
        cls,
        tokens: Iterable[bytes],
        *,
        eog_ids: Iterable[int] = (),
        control_ids: Iterable[int] = (),
        control_text: dict[int, str] | None = None,
        n_logits: int = 0,
        name: str = "",
    ) -> Vocabulary:
        """A vocabulary from plain byte strings (tests, hand-made vocabularies)."""
        eog = frozenset(eog_ids)
        return cls(
            tokens=tuple(bytes(t) for t in tokens),
            control_ids=frozenset(control_ids) | eog,
            eog_ids=eog,
            control_text=dict(control_text or {}),
            n_logits=n_logits,
            name=name,
        )

    def to_arrays(self) -> tuple[dict[str, np.ndarray], dict]:
        """The vocabulary as plain arrays and JSON metadata (for the data-only disk cache)."""
        arrays = {
            "data": np.frombuffer(self._joined(), dtype=np.uint8),
            "lengths": self.lengths,
            "control_ids": np.asarray(sorted(self.control_ids), dtype=np.int64),
            "eog_ids": np.asarray(sorted(self.eog_ids), dtype=np.int64),
        }
        meta = {
            "n_logits": self.n_logits,
            "name": self.name,
            "control_text": [[i, t] for i, t in sorted(self.control_text.items())],
            "fingerprint": [_fingerprint_rule(), self.fingerprint],
        }
        return arrays, meta

    @classmethod
    def from_arrays(cls, arrays: dict[str, np.ndarray], meta: dict) -> Vocabulary:
        """Inverse of `to_arrays` (ValueError when the parts do not fit together)."""
        data = bytes(arrays["data"])
        lens = np.asarray(arrays["lengths"], dtype=np.int64)
        if (lens < 0).any() or int(lens.sum()) != len(data):
            raise ValueError("token lengths do not match the token bytes")
        vocab = cls(
            tokens=PackedTokens(data, lens),
            control_ids=frozenset(int(i) for i in arrays["control_ids"]),
            eog_ids=frozenset(int(i) for i in arrays["eog_ids"]),
            control_text={int(i): str(t) for i, t in meta["control_text"]},
            n_logits=int(meta["n_logits"]),
            name=str(meta["name"]),
        )
        saved = meta.get("fingerprint")
        if isinstance(saved, list) and len(saved) == 2 and saved[0] == _fingerprint_rule():
            vocab.__dict__["fingerprint"] = str(saved[1])  # hashing 262k tokens again costs 0.2-0.5 s
        return vocab

    @property
    def n_tokens(self) -> int:
        return len(self.tokens)

    def __len__(self) -> int:
        return len(self.tokens)

    def token_bytes(self, token_id: int) -> bytes:
        """The bytes the token adds to the output (b"" for control tokens and padding rows)."""
        if 0 <= token_id < len(self.tokens) and token_id not in self.control_ids:
            return self.tokens[token_id]
        return b""

    def piece(self, token_id: int) -> str:
        """Human-readable text for a token (control tokens by their name)."""
        if token_id in self.control_text:
            return self.control_text[token_id]
        return self.token_bytes(token_id).decode("utf-8", "replace")

    def decode(self, ids: Sequence[int]) -> bytes:
        return b"".join(self.token_bytes(i) for i in ids)

    def id_of_control(self, text: str) -> int | None:
        """The id of the control token whose text is `text` (`<|im_end|>`), else None."""
        return self._control_by_text.get(text)

    @cached_property
    def _control_by_text(self) -> dict[str, int]:
        return {t: i for i, t in sorted(self.control_text.items(), reverse=True)}

    @cached_property
    def text_ids(self) -> np.ndarray:
        """Ids of ordinary, non-empty text tokens: the only candidates for byte matching."""
        keep = self.lengths > 0
        keep[[i for i in self.control_ids if i < len(keep)]] = False
        return np.flatnonzero(keep).astype(np.int32)

    @cached_property
    def lengths(self) -> np.ndarray:
        """The byte length of every token (int64)."""
        if isinstance(self.tokens, PackedTokens):
            return self.tokens.lengths
        return np.fromiter((len(t) for t in self.tokens), dtype=np.int64, count=len(self.tokens))

    def _joined(self) -> bytes:
        return self.tokens.joined() if isinstance(self.tokens, PackedTokens) else b"".join(self.tokens)

    @cached_property
    def fingerprint(self) -> str:
        """A hash of everything that affects masks (for caches)."""
        h = hashlib.sha256()
        h.update(f"{self.n_logits}|{sorted(self.control_ids)}|{sorted(self.eog_ids)}|".encode())
        h.update(self.lengths.tobytes())
        h.update(self._joined())
        for i in sorted(self.control_text):
            h.update(f"{i}={self.control_text[i]};".encode())
        return h.hexdigest()[:32]


@lru_cache(maxsize=1)
def _fingerprint_rule() -> str:
    """Which rule computed a saved fingerprint: a hash of this module's source."""
    return hashlib.sha256(Path(__file__).read_bytes()).hexdigest()[:16]
