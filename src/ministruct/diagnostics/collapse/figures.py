"""The study report's figures (PNG, matplotlib): the seed experiment's four, plus
diversity and the order of operations. Each function writes one file and returns its
path, or None when there is nothing to draw."""

from __future__ import annotations

from pathlib import Path
from typing import Sequence

import numpy as np

from ministruct.diagnostics.collapse.breakdown import nucleus_sizes
from ministruct.diagnostics.collapse.render import require_matplotlib, write_figures
from ministruct.diagnostics.collapse.report import ALL, CollapseReport, pairs_of

DPI = 110


def _plt():
    require_matplotlib("the study report's figures")
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig, path: Path) -> Path:
    fig.savefig(path, dpi=DPI, bbox_inches="tight")
    _plt().close(fig)
    return path


def nucleus_figure(report: CollapseReport, out: Path) -> Path | None:
    """Figure 1: free-choice (unmasked) vs constrained (masked) nucleus sizes of free
    steps at the reference setting, one panel per condition."""
    sizes = nucleus_sizes(report.generations)
    if not sizes:
        return None
    plt = _plt()
    t, p = report.settings.reference
    fig, axes = plt.subplots(1, len(sizes), figsize=(5 * len(sizes), 3.8), squeeze=False, constrained_layout=True)
    for ax, (cond, (raw, masked)) in zip(axes[0], sizes.items()):
        top = max([*raw, *masked, 1])
        bins = np.unique(np.round(np.logspace(0, np.log10(top + 1), 30))).astype(int)
        bins = np.append(bins, bins[-1] + 1)
        ax.hist(raw, bins=bins, alpha=0.55, label=f"free choice (unmasked), n={len(raw)}", color="tab:blue")
        ax.hist(masked, bins=bins, alpha=0.55, label="constrained (masked)", color="tab:orange")
        ax.set_xscale("log")
        ax.set_xlabel("nucleus size (tokens)")
        ax.set_ylabel("free steps")
        ax.set_title(f"schema {cond}: nucleus at T={t:g}, top_p={p:g}")
        ax.legend(fontsize=8)
    return _save(fig, out / "fig1_nucleus_sizes.png")


def grid_figure(report: CollapseReport, out: Path) -> Path | None:
    """Figure 2: the pooled collapse rate over the whole grid (all schemas, per condition)."""
    written = write_figures(report, str(out))
    src = written[0]
    dst = out / "fig2_collapse_grid.png"
    src.replace(dst)
    for extra in written[1:]:
        extra.unlink(missing_ok=True)
    return dst


def paired_figure(report: CollapseReport, out: Path) -> Path | None:
    """Figure 3: each (schema, prompt, seed) pair, schema shown vs withheld: mean Z and
    the collapse rate at the reference setting, joined by a line per pair."""
    pairs = pairs_of(report.generations)
    if not pairs:
        return None
    plt = _plt()
    col = report.reference_column
    fig, axes = plt.subplots(1, 2, figsize=(9, 4), constrained_layout=True)
    schemas = list(dict.fromkeys(s.schema for s, _ in pairs))
    colors = plt.get_cmap("tab10")
    for s, w in pairs:
        c = colors(schemas.index(s.schema) % 10)
        zs, zw = s.mean_Z(), w.mean_Z()
        if zs is not None and zw is not None:
            axes[0].plot([0, 1], [zs, zw], "-o", color=c, alpha=0.6, ms=3)
        rs = [float(np.mean(g.collapsed[g.free, col])) if g.n_free else None for g in (s, w)]
        if None not in rs:
            axes[1].plot([0, 1], rs, "-o", color=c, alpha=0.6, ms=3)
    for ax, what in zip(axes, ("mean Z (free steps)", "collapse rate")):
        ax.set_xticks([0, 1], ["shown", "withheld"])
        ax.set_xlim(-0.3, 1.3)
        ax.set_ylim(-0.02, 1.02)
        ax.set_ylabel(what)
    axes[0].set_title("legal mass per pair")
    axes[1].set_title("collapse per pair")
    handles = [plt.Line2D([], [], color=colors(i % 10), label=s) for i, s in enumerate(schemas)]
    axes[1].legend(handles=handles, fontsize=7, loc="lower right")
    return _save(fig, out / "fig3_paired.png")


def _schema_bars(ax, schemas: list[str], conds: list[str], value, ylabel: str, title: str) -> None:
    """Bars per schema, one per condition; `value(schema, cond)` gives the height (or None)."""
    width = 0.8 / len(conds)
    x = np.arange(len(schemas))
    for k, cond in enumerate(conds):
        vals = [value(s, cond) for s in schemas]
        ax.bar(x + k * width, [np.nan if v is None else v for v in vals], width, label=cond)
    ax.set_xticks(x + width * (len(conds) - 1) / 2, [Path(s).stem for s in schemas], rotation=25, ha="right")
    ax.set_ylim(0, 1)
    ax.set_ylabel(ylabel)
    ax.set_title(title)
    ax.legend(fontsize=8)


def position_figure(report: CollapseReport, part_rows: Sequence[dict], out: Path) -> Path | None:
    """Figure 4: the collapse rate by schema (bars per condition) and by grammar part."""
    plt = _plt()
    ref = {(c["schema"], c["condition"]): c for c in report.reference_cells()}
    schemas = [s for s in dict.fromkeys(g.schema for g in report.generations)]
    conds = report.conditions()
    if not schemas:
        return None
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
    width = 0.8 / len(conds)
    _schema_bars(
        axes[0],
        schemas,
        conds,
        lambda s, c: (ref.get((s, c)) or {}).get("pooled_rate"),
        "pooled collapse rate",
        "by schema (reference setting)",
    )
    parts = [p for p in ("key", "value", "structure", "whitespace") if any(r["position"] == p for r in part_rows)]
    if parts:
        xp = np.arange(len(parts))
        for k, cond in enumerate(conds):
            by = {r["position"]: r for r in part_rows if r["schema"] == ALL and r["condition"] == cond}
            vals = [(by.get(p) or {}).get("pooled_rate") for p in parts]
            counts = [(by.get(p) or {}).get("free_steps", 0) for p in parts]
            bars = axes[1].bar(xp + k * width, [np.nan if v is None else v for v in vals], width, label=cond)
            for b, n in zip(bars, counts):
                axes[1].text(b.get_x() + b.get_width() / 2, 0.01, str(n), ha="center", va="bottom", fontsize=7)
        axes[1].set_xticks(xp + width * (len(conds) - 1) / 2, parts)
        axes[1].set_ylim(0, 1)
        axes[1].set_title("by grammar position (all schemas; numbers: free steps)")
        axes[1].legend(fontsize=8)
    return _save(fig, out / "fig4_collapse_by_schema_and_position.png")


def diversity_figure(div_rows: Sequence[dict], free_rows: Sequence[dict], out: Path) -> Path | None:
    """Left: distinct outputs per prompt (share of seeds) per schema and condition, and
    the free control's valid share. Right: each field's entropy over the seeds (bits),
    averaged over the fields and prompts of a schema."""
    if not div_rows:
        return None
    plt = _plt()
    schemas = list(dict.fromkeys(r["schema"] for r in div_rows))
    conds = list(dict.fromkeys(r["condition"] for r in div_rows))
    series = [*conds, "free control (valid)"] if free_rows else conds
    width = 0.8 / len(series)
    x = np.arange(len(schemas))
    fig, axes = plt.subplots(1, 2, figsize=(13, 4.2), constrained_layout=True)
    top_bits = 1.0
    for k, cond in enumerate(conds):
        share, bits = [], []
        for s in schemas:
            rows = [r for r in div_rows if r["schema"] == s and r["condition"] == cond]
            n = sum(r["n"] for r in rows)
            share.append(sum(r["distinct_outputs"] for r in rows) / n if n else np.nan)
            h = [f["entropy_bits"] for r in rows for f in r["fields"]]
            bits.append(float(np.mean(h)) if h else np.nan)
        axes[0].bar(x + k * width, share, width, label=f"{cond}: distinct outputs / generations")
        axes[1].bar(x + k * width, bits, width, label=cond)
        top_bits = max([top_bits, *[b * 1.1 for b in bits if b == b]])
    if free_rows:
        by = {r["schema"]: r for r in free_rows}
        vals = [(by[s]["valid"] / by[s]["n"]) if s in by and by[s]["n"] else np.nan for s in schemas]
        axes[0].bar(x + len(conds) * width, vals, width, label="free control: valid JSON share", color="0.5")
    for ax in axes:
        ax.set_xticks(x + width * (len(series) - 1) / 2, [Path(s).stem for s in schemas], rotation=25, ha="right")
        ax.legend(fontsize=8)
    axes[0].set_ylim(0, 1.05)
    axes[0].set_title("whole-output diversity over seeds, per prompt")
    axes[1].set_ylim(0, top_bits)
    axes[1].set_ylabel("bits")
    axes[1].set_title("mean per-field entropy over seeds (invalid output = one value)")
    return _save(fig, out / "diversity.png")


def order_figure(report: CollapseReport, order_rows: Sequence[dict], out: Path) -> Path | None:
    """The order of operations per schema: the share of free steps where truncation
    first leaves no legal token, and the distribution of the TV distance."""
    rows = [r for r in order_rows if r["schema"] != ALL]
    if not rows:
        return None
    plt = _plt()
    schemas = list(dict.fromkeys(r["schema"] for r in rows))
    conds = list(dict.fromkeys(r["condition"] for r in rows))
    fig, axes = plt.subplots(1, 2, figsize=(12, 4.2), constrained_layout=True)
    by = {(r["schema"], r["condition"]): r for r in rows}
    _schema_bars(
        axes[0],
        schemas,
        conds,
        lambda s, c: (by.get((s, c)) or {}).get("empty_rate"),
        "share of free steps",
        "truncation first: no legal token in the nucleus",
    )
    for cond in conds:
        tv = [
            x
            for g in report.generations
            if g.condition == cond and g.order_tv is not None
            for x in g.order_tv[g.free].tolist()
            if x == x
        ]
        if tv:
            axes[1].hist(tv, bins=np.linspace(0, 1, 21), alpha=0.55, label=f"{cond} (n={len(tv)})")
    axes[1].set_yscale("log")
    axes[1].set_xlabel("total variation distance, mask first vs truncation first")
    axes[1].set_ylabel("free steps")
    axes[1].set_title("where truncation first leaves a legal token")
    axes[1].legend(fontsize=8)
    return _save(fig, out / "order_of_operations.png")
