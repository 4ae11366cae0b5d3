"""engine/table.py's configuration ids when interning one grows the arrays."""

from __future__ import annotations

import numpy as np

from ministruct.engine.table import Transitions


def test_an_image_interned_while_the_table_grows_is_read_from_the_grown_arrays():
    tr = Transitions(None, np.zeros(256, dtype=np.int64), np.zeros(1, dtype=np.int64), "<t>")  # type: ignore[arg-type]
    tr.set_canon_map({1000: 1})
    capacity = len(tr.canon)
    for q in range(2, capacity):  # ids 1 .. capacity-2
        tr.intern(frozenset({(q,)}))
    assert len(tr) == capacity - 1
    last = tr.intern(frozenset({(1000,)}))  # the last free row; its image {(1,)} is new and grows the table
    image = tr.intern(frozenset({(1,)}))
    assert last == capacity - 1 and image == capacity and len(tr.canon) > capacity
    assert tr.canon[last] == image and tr.canon[image] == image
