"""The trie walk as one compiled loop (numba), with walk.py's numpy walk as the fallback.

A numpy walk pays a dozen array calls per trie level, whatever the number of live nodes,
and most walks are narrow (a key, a literal, a number: a handful of live nodes per
level); compiled, the same walk visits only the live nodes. The loop never runs Python:
a node whose transition-table cells are not known yet, or whose slice stability is not
known yet, is handed back *blocked*; the caller fills those cells (table.py) and walks on
from the blocked nodes, until nothing is blocked. Results are exactly walk.py's.

Compiled code is cached on disk (numba's cache, under ministruct's cache folder), so
only the first run on a machine pays the compilation (about a second). Without numba,
or with MINISTRUCT_NO_KERNEL=1, `available()` is False and walk.py walks with numpy.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

_lock = threading.Lock()
_state: dict[str, Any] = {}


def _cache_folder() -> str | None:
    from ministruct.engine.cache import cache_dir

    base = cache_dir()
    return str(base / "numba") if base is not None else None


def _build() -> Any:
    """Import numba and define the kernel (None when numba is missing or turned off)."""
    if os.environ.get("MINISTRUCT_NO_KERNEL") == "1":
        return None
    if "NUMBA_CACHE_DIR" not in os.environ:
        folder = _cache_folder()
        if folder is not None:
            os.environ["NUMBA_CACHE_DIR"] = folder
    try:
        from ministruct.engine.native import walk_kernel
    except ImportError:
        return None
    return walk_kernel


def kernel() -> Any:
    """The compiled walk (None when unavailable); built on first use, once per process."""
    if "walk" not in _state:
        with _lock:
            if "walk" not in _state:
                _state["walk"] = _build()
    return _state["walk"]


def available() -> bool:
    return kernel() is not None


def warm() -> bool:
    """Load (or, the first time on a machine, compile) the walk now, on a tiny trie with
    the argument types the engine uses, so the first real mask does not pay for it."""
    run = kernel()
    if run is None:
        return False

    def ro(a: np.ndarray) -> np.ndarray:
        a.setflags(write=False)
        return a

    i32 = lambda *v: ro(np.asarray(v, dtype=np.int32))  # noqa: E731
    run(
        i32(1, 0),  # child_start: the root has one child, node 1
        i32(1, 0),
        ro(np.asarray([0, 97], dtype=np.uint8)),
        i32(-1, 0),
        i32(0, 0),
        i32(1, 1),
        i32(0),
        np.zeros(256, dtype=np.int64),
        np.ones((2, 1), dtype=np.int32),
        np.zeros(2, dtype=bool),
        np.zeros(2, dtype=np.int8),
        np.zeros(1, dtype=np.int64),
        np.ones(1, dtype=np.int64),
        np.zeros(1, dtype=bool),
        np.zeros(1, dtype=np.int64),
        np.zeros(1, dtype=np.int32),
        True,
        True,
        ro(np.zeros(2, dtype=bool)),
        ro(np.zeros(1, dtype=np.uint64)),
        np.ones(2, dtype=np.int8),
        4,
        1,
        np.ones(256, dtype=bool),
    )
    return True
