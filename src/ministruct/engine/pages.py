"""Arrays that grow: fresh zeroed pages from the system, and tables reserved ahead of use.

A new mask or a new block of table rows is written in a few places; taking fresh pages
(touched only where written) instead of a cleared allocation saves faulting in and
zeroing the rest. Transitions (table.py) reserves its table this way, and masks are cut
from chunks of such pages (compile.py).
"""

from __future__ import annotations

import numpy as np

# the table's first allocation: fresh pages, reserved, not written (the system gives them
# as rows are allocated), so that most grammars never grow it; a growth copies the table,
# tens of MB in the middle of a step for a big one
TABLE_RESERVED_BYTES = 32 << 20
TABLE_RESERVED_ROWS = 1 << 16


def grown(a: np.ndarray, size: int, fill: int = 0) -> np.ndarray:
    """`a` with its first axis grown to `size` rows, the new ones set to `fill`."""
    out = np.full((size, *a.shape[1:]), fill, dtype=a.dtype)
    out[: len(a)] = a
    return out


def fresh_pages(shape: tuple[int, ...], dtype: type | np.dtype) -> np.ndarray:
    """A zeroed array of fresh pages from the system, touched only where written (an
    allocator may hand out reused memory and clear all of it first; and numpy asks huge
    pages for a large array, which the system may compact memory for on first touch)."""
    import mmap

    size = max(1, int(np.prod(shape)) * np.dtype(dtype).itemsize)
    # private: an anonymous map is shared by default, and shared pages fault in slower
    private = getattr(mmap, "MAP_PRIVATE", 0) | getattr(mmap, "MAP_ANONYMOUS", 0)
    pages = mmap.mmap(-1, size, flags=private) if private else mmap.mmap(-1, size)
    return np.frombuffer(pages, dtype=dtype, count=int(np.prod(shape))).reshape(shape)


def table_rows(n_classes: int, at_least: int = 64) -> int:
    """Rows to reserve for a table of `n_classes` columns holding `at_least` rows."""
    return max(at_least, min(TABLE_RESERVED_ROWS, TABLE_RESERVED_BYTES // (4 * max(1, n_classes))))


def reserved(a: np.ndarray, size: int, used: int) -> np.ndarray:
    """`a` with room for `size` rows, its first `used` rows copied; the rest unwritten
    (Transitions.intern writes a row when it allocates it)."""
    out = fresh_pages((size, *a.shape[1:]), a.dtype)
    out[:used] = a[:used]
    return out
