"""The collapse report (cli.md, "The collapse report"): grid cells and paired rows.

Definitions (diagnostics.md, "The collapse study"), per schema and for "all" schemas,
per condition and grid cell, over FREE steps only:
- pooled_rate = collapsed free steps / free steps;
- per_generation: the collapse rate of each generation that has a free step, each
  generation weighted equally: n, mean, sd (sample sd, n - 1; null for n < 2), min, max;
- nucleus_changed / top_changed: free steps where the mask changed the nucleus / the
  top token (top_changed does not depend on the cell);
- mean_Z, and pearson_Z_collapsed between Z and the 0/1 collapse flag (null when
  either is constant, e.g. every cell at top_p = 1, where nothing collapses).
Paired rows (per schema and "all"): the (schema, prompt, seed) triples run in both
conditions. mean_Z_shown / mean_Z_withheld average each generation's mean Z over its
free steps, over the pairs where both have free steps; mean_paired_drop is the mean of
shown minus withheld over those pairs. collapse_shown / collapse_withheld are pooled
rates at the reference setting over the paired generations.
Rates are fractions in [0, 1]; an undefined statistic is None (JSON null), never NaN.
"""

from __future__ import annotations

import json
import math
from dataclasses import dataclass
from typing import Iterator, Sequence

import numpy as np

from ministruct.diagnostics.collapse.grid import GenerationGrid, StudySettings
from ministruct.errors import InputError
from ministruct.jobs.records import RECORD_VERSION

ALL = "all"


def rate_summary(rates: Sequence[float]) -> dict:
    """{"n", "mean", "sd", "min", "max"} of per-generation rates (None where undefined)."""
    n = len(rates)
    if n == 0:
        return {"n": 0, "mean": None, "sd": None, "min": None, "max": None}
    mean = math.fsum(rates) / n
    sd = math.sqrt(math.fsum((r - mean) ** 2 for r in rates) / (n - 1)) if n > 1 else None
    return {"n": n, "mean": mean, "sd": sd, "min": min(rates), "max": max(rates)}


def pearson(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Pearson's r of two equal-length samples; None with fewer than 2 or a constant one."""
    a, b = np.asarray(x, dtype=np.float64), np.asarray(y, dtype=np.float64)
    if a.shape != b.shape:
        raise ValueError(f"samples of different lengths: {a.shape} and {b.shape}")
    if a.size < 2 or a.min() == a.max() or b.min() == b.max():
        return None
    da, db = a - a.mean(), b - b.mean()
    denom = math.sqrt(float(np.dot(da, da)) * float(np.dot(db, db)))
    if denom == 0:
        return None
    return max(-1.0, min(1.0, float(np.dot(da, db)) / denom))


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None


def cell_row(
    gens: Sequence[GenerationGrid], col: int, *, schema: str, condition: str, temperature: float, top_p: float
) -> dict:
    """One `cells` row: the generations' free steps evaluated at column `col`. At
    temperature 0 with top_p 1 the rate is undefined (None): at top_p 1 no step is
    collapsed, at temperature 0 every nucleus is the argmax, and the two rules disagree."""
    free = sum(g.n_free for g in gens)
    per_gen = [g.collapsed[g.free, col] for g in gens]
    collapsed = sum(int(np.count_nonzero(c)) for c in per_gen)
    rates = [float(np.count_nonzero(c)) / c.shape[0] for c in per_gen if c.shape[0]]
    z = np.concatenate([g.Z[g.free] for g in gens]) if gens else np.zeros(0)
    flags = np.concatenate(per_gen) if gens else np.zeros(0, dtype=bool)
    undefined = temperature == 0 and top_p >= 1.0
    return {
        "schema": schema,
        "condition": condition,
        "temperature": temperature,
        "top_p": top_p,
        "free_steps": free,
        "collapsed": collapsed,
        "pooled_rate": None if undefined else _ratio(collapsed, free),
        "per_generation": rate_summary([] if undefined else rates),
        "nucleus_changed": sum(int(np.count_nonzero(g.nucleus_changed[g.free, col])) for g in gens),
        "top_changed": sum(int(np.count_nonzero(g.top_changed[g.free])) for g in gens),
        "mean_Z": math.fsum(z.tolist()) / z.shape[0] if z.shape[0] else None,
        "pearson_Z_collapsed": None if undefined else pearson(z, flags.astype(np.float64)),
    }


def paired_row(schema: str, pairs: Sequence[tuple[GenerationGrid, GenerationGrid]], ref: int) -> dict:
    """One `paired` row from (shown, withheld) generations of the same seed; `ref`: the reference column."""
    zs = [(s.mean_Z(), w.mean_Z()) for s, w in pairs]
    zs = [(a, b) for a, b in zs if a is not None and b is not None]
    row: dict = {
        "schema": schema,
        "n_pairs": len(pairs),
        "mean_Z_shown": math.fsum(a for a, _ in zs) / len(zs) if zs else None,
        "mean_Z_withheld": math.fsum(b for _, b in zs) / len(zs) if zs else None,
        "mean_paired_drop": math.fsum(a - b for a, b in zs) / len(zs) if zs else None,
    }
    for name, side in (("shown", [s for s, _ in pairs]), ("withheld", [w for _, w in pairs])):
        free = sum(g.n_free for g in side)
        row[f"collapse_{name}"] = _ratio(sum(int(np.count_nonzero(g.collapsed[g.free, ref])) for g in side), free)
    shown, withheld = row["collapse_shown"], row["collapse_withheld"]
    row["collapse_change"] = None if shown is None or withheld is None else withheld - shown
    for name, side in (("shown", [s for s, _ in pairs]), ("withheld", [w for _, w in pairs])):
        row[f"free_steps_{name}"] = sum(g.n_free for g in side)
        row[f"nucleus_changed_{name}"] = sum(int(np.count_nonzero(g.nucleus_changed[g.free, ref])) for g in side)
        row[f"top_changed_{name}"] = sum(int(np.count_nonzero(g.top_changed[g.free])) for g in side)
    return row


def pairs_of(
    gens: Sequence[GenerationGrid], first: str = "shown", second: str = "withheld"
) -> list[tuple[GenerationGrid, GenerationGrid]]:
    """(first, second) generations (by condition: shown and withheld, or an arm and its
    `+think` twin) sharing schema, prompt and seed, in run order."""
    a: dict[tuple, GenerationGrid] = {}
    b: dict[tuple, GenerationGrid] = {}
    for g in gens:
        if g.condition in (first, second):
            (a if g.condition == first else b)[g.pair_key] = g
    return [(s, b[k]) for k, s in a.items() if k in b]


@dataclass
class CollapseReport:
    """The generations of a study and everything cli.md's report derives from them."""

    settings: StudySettings
    generations: list[GenerationGrid]
    info: dict  # model, constraint kind, schemas, prompts (CollapseStudy.describe)

    @property
    def reference_column(self) -> int:
        return self.settings.evaluated.index(self.settings.reference)

    def groups(self) -> Iterator[tuple[str, list[GenerationGrid]]]:
        """(schema, its generations) for each schema in run order, then ("all", every generation)."""
        order: dict[str, list[GenerationGrid]] = {}
        for g in self.generations:
            order.setdefault(g.schema, []).append(g)
        yield from order.items()
        yield ALL, list(self.generations)

    def conditions(self) -> list[str]:
        present = {g.condition for g in self.generations}
        return [c for c in self.settings.conditions if c in present] + sorted(present - set(self.settings.conditions))

    def cells(self) -> list[dict]:
        """Every (schema | all) x condition x temperature x top_p row."""
        rows = []
        for schema, gens in self.groups():
            for cond in self.conditions():
                sub = [g for g in gens if g.condition == cond]
                if not sub:
                    continue
                for col, (t, p) in enumerate(self.settings.grid.cells):
                    rows.append(cell_row(sub, col, schema=schema, condition=cond, temperature=t, top_p=p))
        return rows

    def paired(self) -> list[dict]:
        """One row per schema with pairs, then "all" (empty when only one condition ran)."""
        rows = []
        for schema, gens in self.groups():
            pairs = pairs_of(gens)
            if pairs:
                rows.append(paired_row(schema, pairs, self.reference_column))
        return rows

    def reference_cells(self) -> list[dict]:
        """The cell rows at the reference setting (computed even when the grid lacks it)."""
        t, p = self.settings.reference
        col = self.reference_column
        rows = []
        for schema, gens in self.groups():
            for cond in self.conditions():
                sub = [g for g in gens if g.condition == cond]
                if sub:
                    rows.append(cell_row(sub, col, schema=schema, condition=cond, temperature=t, top_p=p))
        return rows

    @property
    def incomplete(self) -> int:
        return sum(not g.complete for g in self.generations)

    def to_dict(self) -> dict:
        """The report object of cli.md."""
        ref = self.reference_column
        return {
            "v": RECORD_VERSION,
            "settings": {**self.info, **self.settings.to_dict()},
            "generations": [g.to_record(ref) for g in self.generations],
            "cells": self.cells(),
            "paired": self.paired(),
        }

    def dumps(self) -> str:
        """The report as JSON text (NaN is an error, never written)."""
        return json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, indent=1) + "\n"

    def write(self, path: str) -> None:
        """Write the report to `path` (InputError when it cannot be written)."""
        text = self.dumps()
        try:
            with open(path, "w", encoding="utf-8") as f:
                f.write(text)
        except OSError as e:
            raise InputError(f"{path}: cannot write the report: {e.strerror or e}") from None
