"""Warnings for a generation where the model fights the grammar.

After each generation the job (jobs/job.py) checks three signs (issue: useful JSON by default):
- the mean legal mass Z over 4 or more free steps is below 0.2: the model wanted mostly
  other tokens (fewer steps are too few to judge: a two-way choice has one);
- a run of 16 or more consecutive steps has Z < 0.05: a stretch written against the model;
- the output repeats one pattern of 8 or more bytes 4 or more times in a row
  (whitespace or key loops, the usual sign of a model that cannot find the way out).
Each warning says what was seen and the usual remedy.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ministruct.decode.sampling import legal_mass

if TYPE_CHECKING:
    from ministruct.decode.loop import Step

LOW_MEAN_Z = 0.2
LOW_MEAN_MIN_STEPS = 4  # free steps the mean needs before it is judged
LOW_RUN_Z = 0.05
LOW_RUN_STEPS = 16
LOOP_MIN_BYTES = 8
LOOP_MIN_COPIES = 4


def repeated_pattern(
    data: bytes, min_len: int = LOOP_MIN_BYTES, copies: int = LOOP_MIN_COPIES
) -> tuple[bytes, int] | None:
    """(pattern, copies) of the longest run of one pattern of >= min_len bytes repeated
    >= copies times back to back, or None."""
    n = len(data)
    if n < min_len * copies:
        return None
    a = np.frombuffer(data, dtype=np.uint8)
    best: tuple[bytes, int] | None = None
    for p in range(min_len, n // copies + 1):
        eq = a[p:] == a[:-p]
        need = (copies - 1) * p  # out[j] == out[j+p] for this many positions in a row
        if eq.sum() < need:
            continue
        # longest run of True in eq
        d = np.diff(np.concatenate(([0], eq.view(np.int8), [0])))
        starts, ends = np.flatnonzero(d == 1), np.flatnonzero(d == -1)
        lengths = ends - starts
        k = int(lengths.argmax())
        if lengths[k] >= need:
            n_copies = int(lengths[k] // p) + 1
            if best is None or n_copies * p > best[1] * len(best[0]):
                best = (bytes(a[starts[k] : starts[k] + p]), n_copies)
    return best


SHOW_SCHEMA = "show the schema in the prompt"


def prompt_remedy(kind: str | None, schema_shown: bool) -> str:
    """What to change in the prompt when the model fights the grammar: show a withheld
    schema; otherwise describe the output (a regex, a grammar or choices are never shown)."""
    if kind == "schema" and not schema_shown:
        return SHOW_SCHEMA
    return FightMonitor.remedy


@dataclass
class FightMonitor:
    """Feed it every step (Z, forced or not); `warnings(output)` at the end."""

    remedy: str = "say in the prompt what the output should look like"  # the prompt-side remedy
    z_free: list[float] = field(default_factory=list)
    run: int = 0
    longest_run: int = 0
    n_steps: int = 0

    def observe(self, step: "Step") -> None:
        """Take one decoded step into account."""
        # a fast-forwarded token was dictated, not drawn: it says nothing about the model's
        # choices, and gen evaluates it without its logits row unless something reads it
        if step.mask is None or step.fast_forward or step.logits is None:
            return
        self.add(legal_mass(step.logits, step.mask), np.count_nonzero(step.mask) == 1)

    def add(self, z: float, forced: bool) -> None:
        self.n_steps += 1
        if not forced:
            self.z_free.append(z)
        self.run = self.run + 1 if z < LOW_RUN_Z else 0
        self.longest_run = max(self.longest_run, self.run)

    def warnings(self, output: bytes) -> list[str]:
        out: list[str] = []
        if len(self.z_free) >= LOW_MEAN_MIN_STEPS:
            mean = sum(self.z_free) / len(self.z_free)
            if mean < LOW_MEAN_Z:
                out.append(
                    f"the model fights the grammar: mean legal mass Z over {len(self.z_free)} free steps is "
                    f"{mean:.3f} (< {LOW_MEAN_Z}); {self.remedy}, or use a larger model"
                )
        if self.longest_run >= LOW_RUN_STEPS:
            out.append(
                f"the model fights the grammar: {self.longest_run} steps in a row had Z < {LOW_RUN_Z}; "
                f"{self.remedy}, or use a larger model"
            )
        loop = repeated_pattern(output)
        if loop is not None:
            pattern, copies = loop
            shown = pattern.decode("utf-8", "replace")
            out.append(
                f"the output repeats {shown!r} {copies} times in a row: the model is looping; "
                f"{self.remedy}, raise the temperature or repeat penalty, or allow more tokens"
            )
        return out
