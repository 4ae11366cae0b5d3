"""The trie walk as one compiled loop (numba), with walk.py's numpy walk as the fallback.

A numpy walk pays a dozen array calls per trie level, whatever the number of live nodes,
and most walks are narrow (a key, a literal, a number: a handful of live nodes per
level); compiled, the same walk visits only the live nodes. The loop never runs Python:
a node whose transition-table cells are not known yet, or whose slice stability is not
known yet, is handed back *blocked*; the caller fills those rows (table.py) and walks on
from the blocked nodes, until nothing is blocked. Results are exactly walk.py's.

Compiled code is cached on disk (numba's cache, under ministruct's cache folder), so
only the first run on a machine pays the compilation (about 4 s); numba's cache files
are pickles, and one that does not load is cleared (one warning) and compiled again.
Loading it still costs a process 0.25-1 s and 100 MB (numba and LLVM), which a short run
would never win back: walks start with numpy, and once numpy walks have taken
LOAD_AFTER_S in total the compiled walk is loaded on a background thread while walks go
on with numpy; they switch when it is ready (`available()` loads it at once, waiting).
Without numba, or with MINISTRUCT_NO_KERNEL=1, walks stay with numpy.
"""

from __future__ import annotations

import os
import threading
from typing import Any

import numpy as np

LOAD_AFTER_S = 0.2

_lock = threading.Lock()
_state: dict[str, Any] = {}
_spent = [0.0]  # seconds of numpy walks so far in this process
_loader: list[threading.Thread] = []  # the background load, once started


def _cache_folder() -> str | None:
    from ministruct.engine.cache import cache_dir

    base = cache_dir()
    return str(base / "numba") if base is not None else None


def _build() -> Any:
    """Import numba and compile (or load) the walk; None when numba is missing, turned off,
    or fails here (the reason is kept in `failure()`: walks then stay with numpy)."""
    if os.environ.get("MINISTRUCT_NO_KERNEL") == "1":
        _state["failure"] = "MINISTRUCT_NO_KERNEL=1"
        return None
    ours = None
    if "NUMBA_CACHE_DIR" not in os.environ:
        ours = _cache_folder()
        if ours is not None:
            os.environ["NUMBA_CACHE_DIR"] = ours
    for attempt in (1, 2):
        try:
            from ministruct.engine.native import walk_kernel

            _run_tiny(walk_kernel)
            _state.pop("failure", None)
            return walk_kernel
        except Exception as e:  # numba missing, too old/new for this numpy, a compile error, a damaged cache
            _state["failure"] = f"{type(e).__name__}: {e}"
            if attempt == 2 or ours is None or not _clear_damaged(ours, e):
                return None
    return None


def _clear_damaged(folder: str, e: Exception) -> bool:
    """Empty numba's cache folder (ours) after it failed to load, saying so once; True
    when there was something to clear. numba's cache files are pickles: a damaged one
    fails to load, and would turn the compiled walk off in every later process."""
    import shutil
    import sys

    if not os.path.isdir(folder) or not os.listdir(folder):
        return False
    shutil.rmtree(folder, ignore_errors=True)
    print(
        f"ministruct: warning: the compiled walk's cache in {folder} did not load ({type(e).__name__}); "
        "cleared it, compiling again (once, about 4 s)",
        file=sys.stderr,
    )
    return True


def failure() -> str | None:
    """Why the compiled walk is not in use (None when it is, or was never asked for)."""
    return _state.get("failure")


def kernel() -> Any:
    """The compiled walk (None when unavailable); built on first use, once per process."""
    if "walk" not in _state:
        with _lock:
            if "walk" not in _state:
                _state["walk"] = _build()
    return _state["walk"]


_entries: dict[tuple, Any] = {}  # call key -> numba's entry point of the compiled version
_by_signature: dict[tuple, Any] = {}  # signature() of the arguments -> that entry point


def signature(args: tuple) -> tuple | None:
    """What decides numba's types of these arguments: per array its dtype, dimensions,
    layout and write and alignment flags; bool; int (whether it fits 32 bits, 64). None
    when an argument is anything else."""
    sig: list[Any] = []
    for a in args:
        if type(a) is np.ndarray or type(a) is np.memmap:
            f = a.flags
            layout = "C" if f.c_contiguous else "F" if f.f_contiguous else "A"
            sig.append((a.dtype.str, a.ndim, layout, f.writeable, f.aligned))
        elif type(a) is bool:
            sig.append(bool)
        elif type(a) is int and a.bit_length() < 64:
            sig.append(a.bit_length() < 32)
        else:
            return None
    return tuple(sig)


def _entry_point(run: Any, args: tuple) -> Any:
    """numba's entry point of the compiled version for these arguments (`run` itself, which
    dispatches, when numba's internals do not say)."""
    sig = signature(args)
    entry = _by_signature.get(sig) if sig is not None else None
    if entry is None:
        try:
            import numba

            entry = run.overloads[tuple(numba.typeof(a) for a in args)].entry_point
        except Exception:  # (numba's internals moved: keep dispatching)
            return run
        if sig is not None:
            _by_signature[sig] = entry
    return entry


def call(key: tuple, args: tuple) -> Any:
    """Run the compiled walk on `args`. Calls with the same `key` must pass arguments of
    the same types (walk.py keys on what decides them); from the second such call on, the
    compiled version is entered directly, without numba's dispatch on the argument types
    (about a fifth of a short walk's call). The entry point is found by the arguments'
    signature(), known from the walk run when the kernel loaded (numba's own typing of
    the arguments costs a fresh process about 0.3 ms per key)."""
    entry = _entries.get(key)
    if entry is not None:
        return entry(*args)
    run = kernel()
    entry = _entry_point(run, args)  # (known when the kernel's load ran these types: no dispatch at all)
    if entry is run:  # not compiled for these types yet, or numba's internals do not say
        out = run(*args)
        _entries[key] = _entry_point(run, args)
        return out
    _entries[key] = entry
    return entry(*args)


def available() -> bool:
    """Load (or, the first time on a machine, compile) the walk now, if not done yet, so
    the first real mask does not pay for it; False when it cannot be had."""
    return kernel() is not None


def wanted() -> bool:
    """Should the next walk be compiled? Once loaded, yes; before, no (and once numpy walks
    have cost more than loading would, the load starts in the background)."""
    if "walk" in _state:
        return _state["walk"] is not None
    if _spent[0] >= LOAD_AFTER_S:
        load_in_background()
    return False


def load_in_background() -> None:
    """Start loading the compiled walk on a daemon thread, if not loaded or loading."""
    if "walk" in _state or _loader:
        return
    with _lock:
        if "walk" in _state or _loader:
            return
        thread = threading.Thread(target=kernel, name="ministruct-kernel-load", daemon=True)
        _loader.append(thread)
        thread.start()


def _finish_loading() -> None:
    """Wait for a background load (before a fork: a child must not inherit a half-done import)."""
    if _loader and _loader[0].is_alive() and _loader[0] is not threading.current_thread():
        _loader[0].join()


if hasattr(os, "register_at_fork"):
    os.register_at_fork(before=_finish_loading)


def spent(seconds: float) -> None:
    """Count time spent in numpy walks (see `wanted`)."""
    _spent[0] += seconds


def _run_tiny(run: Any) -> None:
    """One walk on a tiny trie, with the argument types and write flags the engine uses
    (numba compiles one version per such signature)."""
    from ministruct.engine.trie import TokenTrie

    def ro(a: np.ndarray) -> np.ndarray:
        a.setflags(write=False)
        return a

    trie = TokenTrie.build([b"a"], np.zeros(1, dtype=np.int64))  # the root and one leaf
    args = (
        ro(trie.pre),
        ro(trie.node_pre),
        ro(trie.child_start),
        ro(trie.child_count),
        ro(trie.node_byte),
        ro(trie.tok_lo),
        ro(trie.tok_count),
        ro(trie.sorted_ids),
        np.zeros(256, dtype=np.int64),
        np.ones((2, 1), dtype=np.int32),
        np.zeros(2, dtype=bool),
        np.zeros(2, dtype=np.int8),
        np.asarray([[0], [1], [0]], dtype=np.int64),
        False,
        np.zeros(1, dtype=np.int32),
        True,
        np.zeros(2, dtype=np.int32),
        True,
        True,
        ro(np.zeros(2, dtype=bool)),
        ro(np.zeros(1, dtype=np.uint64)),
        np.ones(2, dtype=np.int8),
        4,
        1,
        np.ones(256, dtype=bool),
        np.zeros(2, dtype=np.int64),
        np.zeros(2, dtype=np.int64),
        np.zeros(1, dtype=np.int64),
        True,
        trie.max_len + 1,
        1,
    )
    run(*args)
    _entry_point(run, args)
