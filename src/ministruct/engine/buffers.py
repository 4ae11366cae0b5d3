"""Mask buffers handed on from a compiled grammar that is gone to the next one.

A mask is a bool per logits row, 49 KB to 262 KB. Fresh memory costs a page fault per
4 KB page on its first write: on a new configuration that is often more than the walk
that finds its tokens. When a CompiledGrammar is garbage-collected, the masks it kept
that nothing else holds go to a small process-wide pool, and the next grammar writes its
masks into them. Nothing else holds an array when its reference count says so: a caller
keeping a mask, a view of it or a matcher over the grammar keeps the array out of the pool.
"""

from __future__ import annotations

import sys
import threading
from typing import Any

import numpy as np

POOL_BYTES = 64 * 1024 * 1024  # at most this much kept for reuse, per process

_lock = threading.Lock()
_free: dict[int, list[np.ndarray]] = {}
_held = [0]  # bytes in _free


def take(n: int) -> np.ndarray | None:
    """A writable bool array of n items from the pool (its contents left over), or None."""
    with _lock:
        spare = _free.get(n)
        if not spare:
            return None
        out = spare.pop()
        _held[0] -= out.nbytes
    out.setflags(write=True)
    return out


def give_back(caches: tuple[dict[Any, Any], ...]) -> None:
    """Empty these caches, and pool the bool arrays among their values that nothing else holds."""
    arrays = {id(v): v for cache in caches for v in cache.values() if _poolable(v)}
    for cache in caches:
        cache.clear()
    for a in arrays.values():
        # the references counted: `arrays`, the loop variable and getrefcount's argument
        if sys.getrefcount(a) > _UNHELD:
            continue
        with _lock:
            if _held[0] + a.nbytes > POOL_BYTES:
                return
            _free.setdefault(len(a), []).append(a)
            _held[0] += a.nbytes


def _poolable(value: Any) -> bool:
    return isinstance(value, np.ndarray) and value.dtype == np.bool_ and value.ndim == 1 and value.flags.owndata


def pooled_bytes() -> int:
    """Bytes kept in the pool now."""
    with _lock:
        return _held[0]


def _count_unheld() -> int:
    arrays = {0: np.zeros(1, dtype=bool)}
    for a in arrays.values():
        return sys.getrefcount(a)
    return 0


_UNHELD = _count_unheld()  # (the count of an array held only as give_back holds it)
