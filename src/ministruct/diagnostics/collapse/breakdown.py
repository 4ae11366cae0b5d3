"""Collapse by grammar position, and the order of operations, per schema.

Positions (engine/positions.py): each step counts at the position of its token's
first byte (where the model's choice starts); a token whose bytes reach more than one
position is counted there and also in `spanning`. Over free steps, at the reference
setting: free steps, collapsed, the pooled rate, and mean Z.

Order of operations (order.py), over free steps at the reference setting: how many
leave truncation-first with no legal token in the nucleus (`empty`, and its share),
and the total variation distance between the two sampling distributions on the others
(mean and max, and how many differ at all). `empty_all` counts every step (forced too).
"""

from __future__ import annotations

import math
from typing import Iterator, Sequence

import numpy as np

from ministruct.diagnostics.collapse.grid import GenerationGrid
from ministruct.diagnostics.collapse.report import ALL

PARTS = ("key", "value", "structure", "whitespace", "end", "rule")


def _groups(gens: Sequence[GenerationGrid]) -> Iterator[tuple[str, str, list[GenerationGrid]]]:
    """(schema, condition, generations) per schema in run order, then "all" per condition."""
    conds = list(dict.fromkeys(g.condition for g in gens))
    schemas = list(dict.fromkeys(g.schema for g in gens))
    for s in [*schemas, ALL]:
        for c in conds:
            sub = [g for g in gens if g.condition == c and (s == ALL or g.schema == s)]
            if sub:
                yield s, c, sub


def _row(schema: str, cond: str, key: str, rows: list[tuple[bool, float, bool]]) -> dict:
    free = len(rows)
    coll = sum(r[0] for r in rows)
    return {
        "schema": schema,
        "condition": cond,
        "position": key,
        "free_steps": free,
        "collapsed": coll,
        "pooled_rate": coll / free if free else None,
        "mean_Z": math.fsum(r[1] for r in rows) / free if free else None,
        "spanning": sum(r[2] for r in rows),
    }


def position_rows(gens: Sequence[GenerationGrid], col: int, *, by_part: bool = False) -> list[dict]:
    """Collapse per schema x condition x position (or x part), free steps at column `col`."""
    out = []
    for schema, cond, sub in _groups(gens):
        table: dict[str, list[tuple[bool, float, bool]]] = {}
        for g in sub:
            for i in np.flatnonzero(g.free):
                label = g.position_of(int(i))
                key = label.rsplit(" ", 1)[-1] if by_part else label
                table.setdefault(key, []).append((bool(g.collapsed[i, col]), float(g.Z[i]), g.spans(int(i))))
        keys = sorted(table, key=lambda k: (PARTS.index(k) if k in PARTS else len(PARTS), k)) if by_part else table
        out += [_row(schema, cond, k, table[k]) for k in keys]
    return out


def order_rows(gens: Sequence[GenerationGrid]) -> list[dict]:
    """The order of operations per schema x condition (and all), at the reference setting."""
    out = []
    for schema, cond, sub in _groups(gens):
        sub = [g for g in sub if g.order_empty is not None]
        if not sub:
            continue
        empty = np.concatenate([g.order_empty[g.free] for g in sub])
        tv = np.concatenate([g.order_tv[g.free] for g in sub])
        tv = tv[~np.isnan(tv)]
        free = int(empty.shape[0])
        out.append(
            {
                "schema": schema,
                "condition": cond,
                "free_steps": free,
                "empty": int(np.count_nonzero(empty)),
                "empty_rate": int(np.count_nonzero(empty)) / free if free else None,
                "empty_all": sum(int(np.count_nonzero(g.order_empty)) for g in sub),
                "steps_all": sum(g.n_steps for g in sub),
                "mean_tv": math.fsum(tv.tolist()) / tv.shape[0] if tv.shape[0] else None,
                "max_tv": float(tv.max()) if tv.shape[0] else None,
                "differ": int(np.count_nonzero(tv > 1e-12)),
            }
        )
    return out


def nucleus_sizes(gens: Sequence[GenerationGrid]) -> dict[str, tuple[list[int], list[int]]]:
    """Per condition: (raw, masked) nucleus sizes of free steps at the reference setting."""
    out: dict[str, tuple[list[int], list[int]]] = {}
    for g in gens:
        if g.nucleus_raw is None or g.nucleus_masked is None:
            continue
        raw, masked = out.setdefault(g.condition, ([], []))
        raw += g.nucleus_raw[g.free].tolist()
        masked += g.nucleus_masked[g.free].tolist()
    return out
