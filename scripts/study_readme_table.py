"""Print the README's table for one collapse study, from its report.json.

    .venv/bin/python scripts/study_readme_table.py out/smollm2/report.json

One row per schema and one for all, at the study's reference setting, free steps only:
free steps shown/withheld, the collapse rate in each condition, the paired mean Z, the
nuclei the mask changed, the share of free steps where truncating first leaves no legal
token, and the free control's valid outputs; then the sentence on keys against values.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

HEADER = (
    "| schema | free steps s/w | collapse shown | collapse withheld | mean Z shown -> withheld "
    "| nuclei changed s/w | truncation-first empty s/w | free control valid |\n"
    "|---|---|---|---|---|---|---|---|"
)


def table(report: dict) -> str:
    ref = report["settings"]["reference"]
    cells = {
        (c["schema"], c["condition"]): c
        for c in report["cells"]
        if c["temperature"] == ref["temperature"] and c["top_p"] == ref["top_p"]
    }
    paired = {p["schema"]: p for p in report["paired"]}
    order = {(o["schema"], o["condition"]): o for o in report["order_of_operations"]}
    control = {f["schema"]: f for f in report["free_control"]}
    rows = [HEADER]
    for schema in [*report["settings"]["schemas"], "all"]:
        s, w = cells[(schema, "shown")], cells[(schema, "withheld")]
        p, f = paired[schema], control[schema]
        rows.append(
            f"| {schema} | {s['free_steps']}/{w['free_steps']} | {s['pooled_rate']:.1%} | {w['pooled_rate']:.1%} "
            f"| {p['mean_Z_shown']:.3f} -> {p['mean_Z_withheld']:.3f} "
            f"| {s['nucleus_changed']}/{w['nucleus_changed']} "
            f"| {order[(schema, 'shown')]['empty_rate']:.1%}/{order[(schema, 'withheld')]['empty_rate']:.1%} "
            f"| {f['valid']} of {f['n']} |"
        )
    return "\n".join(rows)


def keys_and_values(report: dict) -> str:
    """Free steps and collapses inside keys and inside values, schema shown, all schemas."""
    got = {}
    for part in ("key", "value"):
        (row,) = [
            p for p in report["parts"] if p["schema"] == "all" and p["condition"] == "shown" and p["position"] == part
        ]
        got[part] = f"{row['collapsed']:,} of {row['free_steps']:,} ({row['collapsed'] / row['free_steps']:.0%})"
    return f"schema shown: inside a key {got['key']} free steps collapse, inside values {got['value']}"


def main() -> None:
    report = json.loads(Path(sys.argv[1]).read_text())
    print(table(report))
    print()
    print(keys_and_values(report))


if __name__ == "__main__":
    main()
