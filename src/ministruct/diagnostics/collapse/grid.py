"""The collapse study's data: the (temperature, top_p) grid, the study settings, and one
generation's per-cell flags (what the report aggregates)."""

from __future__ import annotations

import math
from dataclasses import dataclass, field

import numpy as np

from ministruct.decode.sampling import SamplingParams
from ministruct.diagnostics.collapse.defaults import CONDITIONS, DEFAULT_TEMPERATURES, DEFAULT_TOP_PS
from ministruct.errors import UsageError
from ministruct.jobs.job import SCHEMA_INSTRUCTION

REFERENCE = (0.7, 0.9)


@dataclass(frozen=True)
class Grid:
    """The (temperature, top_p) cells every step is re-evaluated at, temperature-major."""

    temperatures: tuple[float, ...] = DEFAULT_TEMPERATURES
    top_ps: tuple[float, ...] = DEFAULT_TOP_PS

    def __post_init__(self) -> None:
        object.__setattr__(self, "temperatures", tuple(float(t) for t in self.temperatures))
        object.__setattr__(self, "top_ps", tuple(float(p) for p in self.top_ps))
        for name, values in (("--temperatures", self.temperatures), ("--top-ps", self.top_ps)):
            if not values:
                raise UsageError(f"{name} needs at least one value")
            dup = sorted({v for v in values if values.count(v) > 1})
            if dup:
                raise UsageError(f"{name}: {dup[0]:g} is given twice")
        for t in self.temperatures:
            if not (math.isfinite(t) and t >= 0):
                raise UsageError(f"temperatures: each value must be >= 0, got {t:g}", parameter="temperatures")
        for p in self.top_ps:
            if not (0 < p <= 1):
                raise UsageError(f"top_ps: each value must be in (0, 1], got {p:g}", parameter="top_ps")

    @property
    def cells(self) -> list[tuple[float, float]]:
        return [(t, p) for t in self.temperatures for p in self.top_ps]


@dataclass(frozen=True)
class StudySettings:
    """Everything but the model, the schemas and the prompts.

    `params` is the reference setting the generations are sampled at (its seed is
    replaced by each of `seeds`).
    """

    seeds: tuple[int, ...] = (0, 1, 2, 3)
    grid: Grid = field(default_factory=Grid)
    params: SamplingParams = field(default_factory=lambda: SamplingParams(temperature=REFERENCE[0], top_p=REFERENCE[1]))
    conditions: tuple[str, ...] = CONDITIONS
    max_tokens: int = 128
    chat: bool = True
    system: str | None = None

    def __post_init__(self) -> None:
        if not self.seeds:
            raise UsageError("seeds: give at least one seed", parameter="seeds")
        if len(set(self.seeds)) != len(self.seeds):
            raise UsageError("seeds: a seed is given twice", parameter="seeds")
        bad = [c for c in self.conditions if c not in CONDITIONS]
        if bad or not self.conditions:
            raise UsageError(f"conditions must be among {', '.join(CONDITIONS)}, got {list(self.conditions)}")

    @property
    def reference(self) -> tuple[float, float]:
        return (self.params.temperature, self.params.top_p)

    @property
    def evaluated(self) -> list[tuple[float, float]]:
        """The grid's cells, then the reference setting when the grid lacks it."""
        cells = self.grid.cells
        return cells if self.reference in cells else [*cells, self.reference]

    def to_dict(self) -> dict:
        return {
            "reference": {"temperature": self.params.temperature, "top_p": self.params.top_p},
            "sampling": {k: v for k, v in self.params.to_dict().items() if k != "seed"},
            "seeds": list(self.seeds),
            "temperatures": list(self.grid.temperatures),
            "top_ps": list(self.grid.top_ps),
            "conditions": list(self.conditions),
            "max_tokens": self.max_tokens,
            "chat": self.chat,
            "system": self.system,
            "schema_instruction": SCHEMA_INSTRUCTION,
            "step_statistics_over": "free steps",
        }


def _bits(flags: np.ndarray) -> str:
    return "".join("1" if x else "0" for x in flags.tolist())


def _flags(text: str) -> np.ndarray:
    return np.array([c == "1" for c in text], dtype=bool)


@dataclass
class GenerationGrid:
    """One generation, and its per-step flags at each evaluated (temperature, top_p).

    Columns of `collapsed` / `nucleus_changed` follow `StudySettings.evaluated`.
    Z, the forced/free tag and top_changed do not depend on the cell.
    """

    schema: str
    prompt: str
    prompt_index: int
    condition: str
    seed: int
    Z: np.ndarray  # (n_steps,) float64
    free: np.ndarray  # (n_steps,) bool
    top_changed: np.ndarray  # (n_steps,) bool
    collapsed: np.ndarray  # (n_steps, n_cells) bool
    nucleus_changed: np.ndarray  # (n_steps, n_cells) bool
    complete: bool = True
    stop_reason: str = "grammar_done"
    output: str = ""
    # per step, at the reference setting: truncation first leaves no legal token / its TV
    # distance to mask first (NaN where empty); see order.py
    order_empty: np.ndarray | None = None  # (n_steps,) bool
    order_tv: np.ndarray | None = None  # (n_steps,) float64
    # per step, the token's runs of bytes by grammar position: [(pointer, part, n_bytes), ...]
    positions: list[list[tuple[str, str, int]]] | None = None
    nucleus_raw: np.ndarray | None = None  # (n_steps,) int: nucleus sizes at the reference setting
    nucleus_masked: np.ndarray | None = None
    tokens: list[str] | None = None  # per step, the token's text

    def position_of(self, i: int) -> str:
        """The position a table counts for step i: where the token's first byte went."""
        if not self.positions:
            return "?"
        pointer, part, _ = self.positions[i][0]
        return f"{pointer or '/'} {part}"

    def spans(self, i: int) -> bool:
        """Did step i's token span more than one position?"""
        return bool(self.positions) and len(self.positions[i]) > 1

    def to_state(self) -> dict:
        """Everything, as JSON-ready values (from_state gives back an equal generation)."""
        return {
            **self._identity(),
            "output": self.output,
            "Z": self.Z.tolist(),
            "free": _bits(self.free),
            "top_changed": _bits(self.top_changed),
            "collapsed": [_bits(r) for r in self.collapsed],
            "nucleus_changed": [_bits(r) for r in self.nucleus_changed],
            "order_empty": None if self.order_empty is None else _bits(self.order_empty),
            "order_tv": None
            if self.order_tv is None
            else [None if math.isnan(x) else x for x in self.order_tv.tolist()],
            "positions": self.positions,
            "nucleus_raw": None if self.nucleus_raw is None else self.nucleus_raw.tolist(),
            "nucleus_masked": None if self.nucleus_masked is None else self.nucleus_masked.tolist(),
            "tokens": self.tokens,
        }

    @classmethod
    def from_state(cls, d: dict, n_cells: int) -> "GenerationGrid":
        def table(rows: list[str]) -> np.ndarray:
            return np.array([[c == "1" for c in r] for r in rows], dtype=bool).reshape(len(rows), n_cells)

        return cls(
            schema=d["schema"],
            prompt=d["prompt"],
            prompt_index=d["prompt_index"],
            condition=d["condition"],
            seed=d["seed"],
            Z=np.array(d["Z"], dtype=np.float64),
            free=_flags(d["free"]),
            top_changed=_flags(d["top_changed"]),
            collapsed=table(d["collapsed"]),
            nucleus_changed=table(d["nucleus_changed"]),
            complete=d["complete"],
            stop_reason=d["stop_reason"],
            output=d["output"],
            order_empty=None if d.get("order_empty") is None else _flags(d["order_empty"]),
            order_tv=None
            if d.get("order_tv") is None
            else np.array([math.nan if x is None else x for x in d["order_tv"]], dtype=np.float64),
            positions=None if d.get("positions") is None else [[tuple(r) for r in p] for p in d["positions"]],
            tokens=d.get("tokens"),
            nucleus_raw=None if d.get("nucleus_raw") is None else np.array(d["nucleus_raw"], dtype=np.int64),
            nucleus_masked=None if d.get("nucleus_masked") is None else np.array(d["nucleus_masked"], dtype=np.int64),
        )

    @property
    def n_steps(self) -> int:
        return int(self.Z.shape[0])

    @property
    def n_free(self) -> int:
        return int(np.count_nonzero(self.free))

    @property
    def pair_key(self) -> tuple[str, int, int]:
        return (self.schema, self.prompt_index, self.seed)

    def mean_Z(self) -> float | None:
        """Mean Z over the free steps (None without free steps)."""
        z = self.Z[self.free]
        return math.fsum(z.tolist()) / z.shape[0] if z.shape[0] else None

    def _identity(self) -> dict:
        """Which generation this is, and how it ended."""
        return {
            "schema": self.schema,
            "prompt": self.prompt,
            "prompt_index": self.prompt_index,
            "condition": self.condition,
            "seed": self.seed,
            "complete": self.complete,
            "stop_reason": self.stop_reason,
        }

    def to_record(self, ref: int) -> dict:
        """The report's `generations` row; `collapsed` counts free steps collapsed at column `ref`."""
        return {
            **self._identity(),
            "n_steps": self.n_steps,
            "n_free": self.n_free,
            "n_forced": self.n_steps - self.n_free,
            "mean_Z": self.mean_Z(),
            "collapsed": int(np.count_nonzero(self.collapsed[self.free, ref])),
            "output": self.output,
        }
