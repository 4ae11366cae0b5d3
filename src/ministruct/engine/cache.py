"""On-disk cache of vocabulary tries and compiled-grammar state.

Keys hash everything a cached value depends on: the vocabulary's fingerprint, the
grammar's canonical text and rule order, and the source code of the engine modules
themselves, so an entry is never stale. Entries are written atomically; a missing,
partial or unreadable entry is simply rebuilt, so the folder is safe to delete.

Location: $MINISTRUCT_CACHE_DIR, else the user cache directory; MINISTRUCT_NO_CACHE=1
turns it off.
"""

from __future__ import annotations

import hashlib
import os
import pickle
import tempfile
from functools import lru_cache
from pathlib import Path
from typing import Any

from ..grammar.ir import Grammar

_ENGINE_MODULES = ("automaton.py", "compile.py", "trie.py", "utf8.py", "cache.py")


@lru_cache(maxsize=1)
def engine_version() -> str:
    """A hash of the engine's own source: any code change invalidates old entries."""
    h = hashlib.sha256()
    here = Path(__file__).resolve().parent
    for name in _ENGINE_MODULES:
        h.update((here / name).read_bytes())
    return h.hexdigest()[:16]


def cache_dir() -> Path | None:
    """The cache folder, or None when caching is turned off."""
    if os.environ.get("MINISTRUCT_NO_CACHE") == "1":
        return None
    base = os.environ.get("MINISTRUCT_CACHE_DIR")
    if not base:
        import platformdirs

        base = platformdirs.user_cache_dir("ministruct")
    return Path(base) / "engine"


def grammar_key(grammar: Grammar, vocab_fingerprint: str) -> str:
    h = hashlib.sha256()
    for part in (engine_version(), vocab_fingerprint, grammar.root, "\x00".join(grammar.rules), grammar.to_gbnf()):
        h.update(part.encode("utf-8", "surrogatepass"))
        h.update(b"\x01")
    return h.hexdigest()[:32]


def trie_key(vocab_fingerprint: str) -> str:
    return hashlib.sha256(f"{engine_version()}|trie|{vocab_fingerprint}".encode()).hexdigest()[:32]


def load(kind: str, key: str) -> Any | None:
    """The cached value, or None if absent or unreadable."""
    d = cache_dir()
    if d is None:
        return None
    path = d / kind / f"{key}.pkl"
    try:
        with open(path, "rb") as f:
            return pickle.load(f)
    except FileNotFoundError:
        return None
    except Exception:  # a partial or foreign file: drop it and rebuild
        try:
            path.unlink()
        except OSError:
            pass
        return None


def save(kind: str, key: str, value: Any) -> None:
    """Write atomically; failures (read-only disk, full disk) only cost the cache."""
    d = cache_dir()
    if d is None:
        return
    folder = d / kind
    try:
        folder.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(dir=folder, suffix=".tmp")
        with os.fdopen(fd, "wb") as f:
            pickle.dump(value, f, protocol=pickle.HIGHEST_PROTOCOL)
        os.replace(tmp, folder / f"{key}.pkl")
    except OSError:
        try:
            os.unlink(tmp)  # type: ignore[possibly-undefined]
        except (OSError, UnboundLocalError):
            pass
