"""Showing a collapse report: Rich tables for the terminal, and figures (needs matplotlib).

Nothing prints: `collapse_summary` returns a renderable, `write_figures` writes PNG
files and returns their paths.
"""

from __future__ import annotations

import importlib
from pathlib import Path

from rich import box
from rich.console import Group, RenderableType
from rich.table import Table
from rich.text import Text

from ministruct.diagnostics.collapse.report import ALL, CollapseReport, pairs_of
from ministruct.diagnostics.render import fmt_prob
from ministruct.errors import InputError, UsageError

MATPLOTLIB_MISSING = "{what} needs matplotlib, which is not installed (pip install matplotlib)"


def _schema_table(title: str) -> Table:
    """A compact table whose first column names the schema."""
    t = Table(
        title=title,
        box=box.SIMPLE_HEAD,
        title_justify="left",
        title_style="bold",
        padding=0,
        pad_edge=False,
        show_edge=False,
    )
    t.add_column("schema", overflow="fold", min_width=6, max_width=24)
    return t


def _pct(x: float | None) -> str:
    return "n/a" if x is None else f"{x:.1%}"


def _num(x: float | None, fmt: str = "{:.3f}") -> str:
    return "n/a" if x is None else fmt.format(x)


def _names(report: CollapseReport) -> dict[str, str]:
    """Schema sources shown by file name when the names are unique."""
    sources = list(report.info.get("schemas", []))
    names = [Path(s).name for s in sources]
    short = dict(zip(sources, names)) if len(set(names)) == len(names) else {s: s for s in sources}
    return {**short, ALL: ALL}


def grid_table(report: CollapseReport, condition: str, schema: str = ALL) -> Group:
    """Pooled collapse rate per cell: one row per temperature, one column per top_p."""
    grid = report.settings.grid
    ref = report.settings.reference
    cells = {
        (c["temperature"], c["top_p"]): c
        for c in report.cells()
        if c["schema"] == schema and c["condition"] == condition
    }
    free = next(iter(cells.values()))["free_steps"] if cells else 0
    title = Text(
        f"collapse rate, schema {condition} ({_names(report).get(schema, schema)}: {free} free steps)", style="bold"
    )
    t = Table(box=box.SIMPLE_HEAD)
    t.add_column("T \\ top_p", justify="right")
    for p in grid.top_ps:
        t.add_column(f"{p:g}", justify="right")
    for temp in grid.temperatures:
        row = []
        for p in grid.top_ps:
            c = cells.get((temp, p))
            text = _pct(c["pooled_rate"]) if c else ""
            row.append(Text(text, style="bold reverse" if (temp, p) == ref else ""))
        t.add_row(f"{temp:g}", *row)
    return Group(title, t)


def reference_table(report: CollapseReport) -> Table:
    """Each schema and condition at the reference setting: counts, rates, Z, Pearson."""
    t_ref, p_ref = report.settings.reference
    t = _schema_table(f"free steps at the reference setting (T={t_ref:g}, top_p={p_ref:g})")
    t.add_column("cond", no_wrap=True)
    for name in ("free", "coll", "pooled", "per gen", "range", "nucl", "top", "mean Z", "r(Z,c)"):
        t.add_column(name, justify="right", no_wrap=True)
    names = _names(report)
    for c in report.reference_cells():
        g = c["per_generation"]
        per = (
            "n/a"
            if g["mean"] is None
            else (f"{g['mean']:.1%}" if g["sd"] is None else f"{100 * g['mean']:.1f}±{100 * g['sd']:.1f}%")
        )
        span = "n/a" if g["min"] is None else f"{100 * g['min']:.0f}-{g['max']:.0%}"
        t.add_row(
            Text(names.get(c["schema"], c["schema"])),
            c["condition"],
            str(c["free_steps"]),
            str(c["collapsed"]),
            _pct(c["pooled_rate"]),
            per,
            span,
            str(c["nucleus_changed"]),
            str(c["top_changed"]),
            "n/a" if c["mean_Z"] is None else fmt_prob(c["mean_Z"]),
            _num(c["pearson_Z_collapsed"]),
        )
    return t


def paired_table(report: CollapseReport, rows: list[dict]) -> Table:
    """Shown vs withheld over the same seeds: mean Z, its paired drop, collapse rates."""
    t = _schema_table("schema shown vs withheld, paired by prompt and seed (collapse at the reference setting)")
    for name in ("pairs", "Z shown", "Z w/held", "drop", "coll s", "coll w", "nucl s/w", "top s/w"):
        t.add_column(name, justify="right", no_wrap=True)
    names = _names(report)
    for r in rows:
        t.add_row(
            Text(names.get(r["schema"], r["schema"])),
            str(r["n_pairs"]),
            _num(r["mean_Z_shown"], "{:.4f}"),
            _num(r["mean_Z_withheld"], "{:.4f}"),
            _num(r["mean_paired_drop"], "{:+.4f}"),
            _pct(r["collapse_shown"]),
            _pct(r["collapse_withheld"]),
            f"{r['nucleus_changed_shown']}/{r['nucleus_changed_withheld']}",
            f"{r['top_changed_shown']}/{r['top_changed_withheld']}",
        )
    return t


def collapse_summary(report: CollapseReport) -> RenderableType:
    """The terminal summary: a headline, the grid for all schemas per condition, the
    reference-setting rows, and the paired comparison."""
    gens = report.generations
    info = report.info
    head = Text(
        f"{len(gens)} generations ({len(gens) - report.incomplete} complete) of {info.get('model', '?')}: "
        f"{len(info.get('schemas', []))} schema(s) x {len(info.get('prompts', []))} prompt(s) x "
        f"{len(report.settings.seeds)} seed(s) x {', '.join(report.conditions())}"
    )
    note = Text(
        "pooled rate = collapsed / free steps; highlighted: the reference setting the generations "
        "were sampled at; per gen: mean ± sd of each generation's rate; nucl / top: free steps where "
        "the mask changed the nucleus / the top token; mean Z and r(Z,c) (Pearson, Z vs collapsed) "
        "over free steps; s / w: schema shown / withheld",
        style="dim",
    )
    parts: list[RenderableType] = [head, note]
    parts += [grid_table(report, cond) for cond in report.conditions()]
    parts.append(reference_table(report))
    paired = report.paired()
    if paired:
        parts.append(paired_table(report, paired))
    spaced: list[RenderableType] = parts[:2]
    for part in parts[2:]:
        spaced += [Text(""), part]
    return Group(*spaced)


def require_matplotlib(what: str = "--plot") -> None:
    """UsageError (one line) naming `what` needs it, when matplotlib cannot be imported."""
    try:
        importlib.import_module("matplotlib")
    except ImportError:
        raise UsageError(MATPLOTLIB_MISSING.format(what=what)) from None


def write_figures(report: CollapseReport, folder: str) -> list[Path]:
    """collapse_grid.png (pooled rate heatmaps, all schemas, per condition) and, with pairs,
    paired_Z.png (each pair's mean Z, shown against withheld). Returns the paths written."""
    require_matplotlib()
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    out = Path(folder)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as e:
        raise InputError(f"{folder}: cannot create the figure folder: {e.strerror or e}") from None
    grid = report.settings.grid
    conds = report.conditions()
    cells = report.cells()
    fig, axes = plt.subplots(1, len(conds), figsize=(4.8 * len(conds) + 1, 4.2), squeeze=False, constrained_layout=True)
    for ax, cond in zip(axes[0], conds):
        by = {
            (c["temperature"], c["top_p"]): c["pooled_rate"]
            for c in cells
            if c["schema"] == ALL and c["condition"] == cond
        }
        data = [[by.get((t, p)) for p in grid.top_ps] for t in grid.temperatures]
        values = [[float("nan") if v is None else v for v in row] for row in data]
        im = ax.imshow(values, vmin=0, vmax=1, cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(grid.top_ps)), [f"{p:g}" for p in grid.top_ps])
        ax.set_yticks(range(len(grid.temperatures)), [f"{t:g}" for t in grid.temperatures])
        ax.set_xlabel("top_p")
        ax.set_ylabel("temperature")
        ax.set_title(f"collapse rate, schema {cond}")
        for i, row in enumerate(data):
            for j, v in enumerate(row):
                if v is not None:
                    ax.text(j, i, f"{v:.0%}", ha="center", va="center", color="w" if v < 0.5 else "k", fontsize=8)
    fig.colorbar(im, ax=axes[0].tolist(), label="pooled collapse rate")
    written = [out / "collapse_grid.png"]
    fig.savefig(written[0], dpi=120, bbox_inches="tight")
    plt.close(fig)

    pairs = [(s.mean_Z(), w.mean_Z()) for s, w in pairs_of(report.generations)]
    pairs = [(a, b) for a, b in pairs if a is not None and b is not None]
    if pairs:
        fig, ax = plt.subplots(figsize=(4.5, 4.5), constrained_layout=True)
        ax.plot([0, 1], [0, 1], color="0.7", lw=1)
        ax.scatter([b for _, b in pairs], [a for a, _ in pairs], s=18)
        ax.set_xlim(0, 1.02)
        ax.set_ylim(0, 1.02)
        ax.set_xlabel("mean Z, schema withheld")
        ax.set_ylabel("mean Z, schema shown")
        ax.set_title("legal mass per pair (free steps)")
        written.append(out / "paired_Z.png")
        fig.savefig(written[-1], dpi=120, bbox_inches="tight")
        plt.close(fig)
    return written
