"""The study report folder: report.md (every table, the figures, the settings, the
model, the seed experiment's published numbers beside ours), report.json (the same
numbers) and the PNG figures. Nothing in it depends on when or how fast it ran, so a
resumed study writes the same report."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Sequence

from ministruct.diagnostics.collapse import figures
from ministruct.diagnostics.collapse.breakdown import order_rows, position_rows
from ministruct.diagnostics.collapse.diversity import diversity, free_control
from ministruct.diagnostics.collapse.p_valid import p_valid_rows
from ministruct.diagnostics.collapse.report import ALL
from ministruct.diagnostics.collapse.runner import StudyResult
from ministruct.diagnostics.collapse.studyfile import StudySpec
from ministruct.errors import OutputError

# The seed experiment's numbers (diagnostics.md and issue 26): (what, value, model).
PUBLISHED = [
    ("schema shown: free steps collapsed (pooled)", "336 of 427 (78.7%)", "Qwen2.5-1.5B"),
    ("schema shown: per-generation collapse", "mean 82.5%, sd 10.0, range 70-100%", "Qwen2.5-1.5B"),
    ("schema shown: nuclei changed by the mask", "0 of 427", "Qwen2.5-1.5B"),
    ("mean Z, shown -> withheld", "0.9996 -> 0.7962", "Qwen2.5-1.5B"),
    ("schema withheld: nuclei changed / top tokens changed", "120 of 556 (21.6%) / 106", "Qwen2.5-1.5B"),
    ("pooled collapse", "76.2%; 38 of 504 nuclei changed", "TinyLlama"),
    ("Pearson(Z, collapse)", "-0.020 (Qwen), -0.056 (TinyLlama)", "both"),
    ("collapse per schema", "73.5% (free string) to 94.4% (tight enum)", "Qwen2.5-1.5B"),
    ("free control: outputs that parse as JSON", "0 of 12", "TinyLlama"),
]


def _fmt(x: Any, kind: str = "") -> str:
    if x is None:
        return "n/a"
    if kind == "%":
        return f"{100 * x:.1f}%"
    if kind == "z":
        return f"{x:.4f}"
    if kind == "r":
        return f"{x:+.3f}"
    if isinstance(x, float):
        return f"{x:.3f}"
    return str(x).replace("|", "\\|")


def table(headers: Sequence[str], rows: Sequence[Sequence[Any]]) -> str:
    """A Markdown table."""
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join("---" for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in r) + " |" for r in rows]
    return "\n".join(lines) + "\n"


def _per_gen(g: dict) -> str:
    if g["mean"] is None:
        return "n/a"
    sd = "" if g["sd"] is None else f", sd {100 * g['sd']:.1f}"
    return f"{100 * g['mean']:.1f}%{sd}, {100 * g['min']:.0f}-{100 * g['max']:.0f}%"


def _position_table(rows: Sequence[dict], what: str) -> str:
    """Collapse per schema x condition x position (or part)."""
    return table(
        ["schema", "cond", what, "free", "collapsed", "pooled", "mean Z", "spanning"],
        [
            (
                x["schema"],
                x["condition"],
                f"`{x['position']}`",
                x["free_steps"],
                x["collapsed"],
                _fmt(x["pooled_rate"], "%"),
                _fmt(x["mean_Z"], "z"),
                x["spanning"],
            )
            for x in rows
        ],
    )


class StudyReport:
    """Every number of a finished study, and its report folder."""

    def __init__(self, result: StudyResult, spec: StudySpec) -> None:
        self.result = result
        self.report = result.report
        self.schemas = schemas = {s.name: s.schema for s in spec.schemas}
        self.settings = {"study_file": spec.path, "free_control": spec.free_control}
        col = self.report.reference_column
        gens = self.report.generations
        self.positions = position_rows(gens, col)
        self.parts = position_rows(gens, col, by_part=True)
        self.order = order_rows(gens)
        self.diversity = diversity(gens, schemas)
        self.free = free_control(result.free, schemas)
        self.p_valid = p_valid_rows(result.p_valid)

    def to_dict(self) -> dict:
        base = self.report.to_dict()
        base["settings"].update(self.settings)
        base.update(
            positions=self.positions,
            parts=self.parts,
            order_of_operations=self.order,
            diversity=self.diversity,
            free_control=self.free,
            free_generations=[r.to_state() for r in self.result.free],
            p_valid=self.p_valid,
            p_valid_runs=[r.to_state() for r in self.result.p_valid],
        )
        return base

    def _decoding(self) -> str:
        n = self.result.parallel
        at_once = f"{n} generations at once in one model batch" if n > 1 else "one generation at a time"
        return f"token by token, no fast-forward, the token budget kept as gen keeps it, {at_once}"

    def ours(self) -> list[str]:
        """Our numbers on the published rows (PUBLISHED), in the same order."""
        ref = {(c["schema"], c["condition"]): c for c in self.report.reference_cells()}
        shown, withheld = ref.get((ALL, "shown")), ref.get((ALL, "withheld"))
        p = next((r for r in self.report.paired() if r["schema"] == ALL), None)
        free = next((r for r in self.free if r["schema"] == ALL), None)

        def pooled(c: dict | None) -> str:
            return "n/a" if c is None else f"{c['collapsed']} of {c['free_steps']} ({_fmt(c['pooled_rate'], '%')})"

        def changed(c: dict | None) -> str:
            if c is None:
                return "n/a"
            share = c["nucleus_changed"] / c["free_steps"] if c["free_steps"] else None
            return f"{c['nucleus_changed']} of {c['free_steps']} ({_fmt(share, '%')})"

        rates = sorted(
            (c["pooled_rate"], s)
            for (s, cond), c in ref.items()
            if s != ALL and cond == "shown" and c["pooled_rate"] is not None
        )
        span = (
            f"{_fmt(rates[0][0], '%')} ({rates[0][1]}) to {_fmt(rates[-1][0], '%')} ({rates[-1][1]})"
            if rates
            else "n/a"
        )
        pearson = ", ".join(f"{_fmt(c['pearson_Z_collapsed'], 'r')} ({c['condition']})" for c in (shown, withheld) if c)
        return [
            pooled(shown),
            "n/a" if shown is None else _per_gen(shown["per_generation"]),
            "n/a" if shown is None else f"{shown['nucleus_changed']} of {shown['free_steps']}",
            "n/a" if p is None else f"{_fmt(p['mean_Z_shown'], 'z')} -> {_fmt(p['mean_Z_withheld'], 'z')}",
            "n/a" if withheld is None else f"{changed(withheld)} / {withheld['top_changed']}",
            "n/a" if shown is None else f"{_fmt(shown['pooled_rate'], '%')} (shown); {changed(shown)} changed",
            pearson or "n/a",
            span,
            "n/a" if free is None else f"{free['parsed']} of {free['n']} (valid: {free['valid']})",
        ]

    def markdown(self, figure_names: dict[str, str]) -> str:
        r = self.report
        s = self.settings
        info = r.info
        gens = r.generations
        st = r.settings
        out: list[str] = [f"# Collapse study: {info.get('model', '?')}\n\n"]
        out.append(
            f"{len(gens)} constrained generations ({len(gens) - r.incomplete} complete) and "
            f"{len(self.result.free)} free-control generations: {len(info['schemas'])} schemas, "
            f"{len(st.seeds)} seeds, conditions {', '.join(r.conditions())}.\n"
        )
        out.append("## Settings\n\n")
        rows = [
            ("model", f"{info.get('model')} (`{info.get('model_path')}`)"),
            ("study file", f"`{s.get('study_file')}`"),
            ("reference setting (sampled at)", f"T={st.params.temperature:g}, top_p={st.params.top_p:g}"),
            ("grid temperatures", ", ".join(f"{t:g}" for t in st.grid.temperatures)),
            ("grid top_p", ", ".join(f"{p:g}" for p in st.grid.top_ps)),
            ("seeds", ", ".join(str(x) for x in st.seeds)),
            ("max_tokens", st.max_tokens),
            ("chat template", st.chat),
            ("system", st.system or "(none)"),
            ("decoding", self._decoding()),
            ("free control", "the same prompts, schema shown, no constraint" if self.result.free else "off"),
            ("P(valid)", self._p_valid_setting()),
        ]
        out.append(table(["setting", "value"], rows))
        out.append("\n## The seed experiment's published numbers beside ours\n\n")
        ours = self.ours()
        out.append(
            table(
                ["", "published", "model", f"ours ({info.get('model')})"],
                [(what, val, model, o) for (what, val, model), o in zip(PUBLISHED, ours)],
            )
        )
        out.append("\n## At the reference setting, per schema\n\n")
        out.append(
            "Free steps only (|L_t| > 1). pooled = collapsed / free steps; per generation: mean, sd, "
            "range of each generation's rate; nucl / top: free steps where the mask changed the nucleus / "
            "the top token; r: Pearson(Z, collapsed).\n\n"
        )
        out.append(
            table(
                ["schema", "cond", "free", "collapsed", "pooled", "per generation", "nucl", "top", "mean Z", "r"],
                [
                    (
                        c["schema"],
                        c["condition"],
                        c["free_steps"],
                        c["collapsed"],
                        _fmt(c["pooled_rate"], "%"),
                        _per_gen(c["per_generation"]),
                        c["nucleus_changed"],
                        c["top_changed"],
                        _fmt(c["mean_Z"], "z"),
                        _fmt(c["pearson_Z_collapsed"], "r"),
                    )
                    for c in r.reference_cells()
                ],
            )
        )
        paired = r.paired()
        if paired:
            out.append("\n## Schema shown vs withheld, paired by prompt and seed\n\n")
            out.append(
                table(
                    [
                        "schema",
                        "pairs",
                        "Z shown",
                        "Z withheld",
                        "mean paired drop",
                        "collapse shown",
                        "collapse withheld",
                        "nucl s/w",
                        "top s/w",
                    ],
                    [
                        (
                            p["schema"],
                            p["n_pairs"],
                            _fmt(p["mean_Z_shown"], "z"),
                            _fmt(p["mean_Z_withheld"], "z"),
                            _fmt(p["mean_paired_drop"], "z"),
                            _fmt(p["collapse_shown"], "%"),
                            _fmt(p["collapse_withheld"], "%"),
                            f"{p['nucleus_changed_shown']}/{p['nucleus_changed_withheld']}",
                            f"{p['top_changed_shown']}/{p['top_changed_withheld']}",
                        )
                        for p in paired
                    ],
                )
            )
        self._p_valid_section(out)
        self._figure(out, figure_names, "fig1", "Figure 1: free-choice vs constrained nucleus sizes")
        out.append("\n## Figure 2: the collapse rate over the grid\n\n")
        for cond in r.conditions():
            cells = {
                (c["temperature"], c["top_p"]): c for c in r.cells() if c["schema"] == ALL and c["condition"] == cond
            }
            out.append(f"\nAll schemas, schema {cond} (pooled rate; rows T, columns top_p):\n\n")
            out.append(
                table(
                    ["T \\ top_p", *[f"{p:g}" for p in st.grid.top_ps]],
                    [
                        (f"{t:g}", *[_fmt((cells.get((t, p)) or {}).get("pooled_rate"), "%") for p in st.grid.top_ps])
                        for t in st.grid.temperatures
                    ],
                )
            )
        self._figure(out, figure_names, "fig2", "")
        self._figure(out, figure_names, "fig3", "Figure 3: the paired seeds, schema shown vs withheld")
        out.append("\n## Figure 4: collapse by schema and by grammar position\n\n")
        out.append(
            "Positions are read from the parser's configuration (not the decoded text): the JSON pointer of the "
            "value being generated (array items as `*`) and the part. A step counts at the position of its "
            "token's first byte; `spanning`: tokens whose bytes reach more than one position.\n\n"
        )
        out.append(_position_table(self.parts, "part"))
        self._figure(out, figure_names, "fig4", "")
        out.append("\nPer schema x position:\n\n")
        out.append(_position_table([x for x in self.positions if x["schema"] != ALL], "position"))
        out.append("\n## Whole-output diversity over the seeds of one prompt\n\n")
        out.append(
            "Per field: distinct values over the seeds and the entropy of their distribution (bits; an output "
            "that is not JSON counts as `(invalid)`); for an enum, the members used and the entropy's maximum "
            "(log2 of the enum size).\n\n"
        )
        drows = []
        for d in self.diversity:
            fields = "; ".join(
                f"`{f['field']}` {f['distinct']} ({f['entropy_bits']:.2f} b"
                + (f", {f['used']}/{f['enum_size']} of enum, max {f['max_bits']:.2f} b" if "enum_size" in f else "")
                + ")"
                for f in d["fields"]
            )
            drows.append((d["schema"], d["prompt_index"] + 1, d["condition"], d["n"], d["distinct_outputs"], fields))
        out.append(table(["schema", "prompt", "cond", "n", "distinct outputs", "per field: distinct (entropy)"], drows))
        if self.free:
            out.append("\n## The free control (the same prompts, schema shown, no constraint)\n\n")
            out.append(
                "parsed: `json.loads` of the stripped output; fenced: JSON once a Markdown code fence is removed; "
                "valid: validates against the schema (jsonschema).\n\n"
            )
            out.append(
                table(
                    ["schema", "n", "parsed", "fenced", "valid", "distinct outputs"],
                    [
                        (f["schema"], f["n"], f["parsed"], f["fenced"], f["valid"], f["distinct_outputs"])
                        for f in self.free
                    ],
                )
            )
        self._figure(out, figure_names, "diversity", "")
        out.append("\n## The order of operations (same captured logits)\n\n")
        out.append(
            f"Mask first (ours): mask -> temperature -> top-p. Truncation first: temperature -> top-p -> mask. At the "
            f"reference setting (T={st.params.temperature:g}, top_p={st.params.top_p:g}), over free steps: empty = "
            "truncation first leaves no legal token in the nucleus; TV = total variation distance between the two "
            "sampling distributions where it does (mean, max, steps where they differ); all steps: empty over every "
            "step, forced included.\n\n"
        )
        out.append(
            table(
                ["schema", "cond", "free", "empty", "empty share", "mean TV", "max TV", "differ", "empty (all steps)"],
                [
                    (
                        o["schema"],
                        o["condition"],
                        o["free_steps"],
                        o["empty"],
                        _fmt(o["empty_rate"], "%"),
                        _fmt(o["mean_tv"], "z"),
                        _fmt(o["max_tv"], "z"),
                        o["differ"],
                        f"{o['empty_all']} of {o['steps_all']}",
                    )
                    for o in self.order
                ],
            )
        )
        self._figure(out, figure_names, "order", "")
        out.append("\n## Generations\n\n")
        out.append(
            table(
                ["schema", "prompt", "cond", "seed", "steps", "free", "stop", "output"],
                [
                    (
                        g.schema,
                        g.prompt_index + 1,
                        g.condition,
                        g.seed,
                        g.n_steps,
                        g.n_free,
                        g.stop_reason,
                        "`" + g.output.replace("`", "'").replace("|", "\\|").replace("\n", " ")[:120] + "`",
                    )
                    for g in gens
                ],
            )
        )
        return "".join(out)

    def _p_valid_setting(self) -> str:
        runs = self.result.p_valid
        if not runs:
            return "off"
        return (
            f"{runs[0].particles} particles (an enum enumerated exactly), T=1, no truncation, seed {runs[0].seed}, "
            "once per schema, prompt and condition"
        )

    def _p_valid_section(self, out: list[str]) -> None:
        """P(valid), shown vs withheld, per schema (p_valid.py)."""
        if not self.p_valid:
            return
        out.append("\n## P(valid), schema shown vs withheld\n\n")
        out.append(
            "The probability that the model, sampling its own distribution (T=1, no truncation: the one Z is "
            "defined on) without the constraint, writes an output the schema accepts within max_tokens, its "
            "end included: `gen --particles N`'s `p_valid` (docs/sampling.md), per prompt, averaged over the "
            "schema's prompts. ratio: shown / withheld, how much of the format the prompt already carried. "
            "method: `exact` (the language enumerated) or `smc` (particles; ESS min: their smallest effective "
            "sample size). It is about the format, not whether an answer is right.\n\n"
        )

        def pv(x: float | None) -> str:
            return "n/a" if x is None else f"{x:.3g}"

        out.append(
            table(
                ["schema", "prompts", "P(valid) shown", "P(valid) withheld", "ratio", "method", "ESS min"],
                [
                    (
                        r["schema"],
                        r["prompts"],
                        pv(r["p_valid_shown"]),
                        pv(r["p_valid_withheld"]),
                        "n/a" if r["ratio"] is None else f"{r['ratio']:.3g}",
                        ", ".join(r["methods"]),
                        "n/a" if r["ess_min"] is None else f"{r['ess_min']:.1f} of {r['particles']}",
                    )
                    for r in self.p_valid
                ],
            )
        )

    @staticmethod
    def _figure(out: list[str], names: dict[str, str], key: str, title: str) -> None:
        if key not in names:
            return
        if title:
            out.append(f"\n## {title}\n\n")
        out.append(f"\n![{key}]({names[key]})\n")

    def write(self, folder: str) -> list[Path]:
        """report.md, report.json and the figures; returns the paths written."""
        out = Path(folder)
        made: dict[str, Path | None] = {
            "fig1": figures.nucleus_figure(self.report, out),
            "fig2": figures.grid_figure(self.report, out),
            "fig3": figures.paired_figure(self.report, out),
            "fig4": figures.position_figure(self.report, self.parts, out),
            "diversity": figures.diversity_figure(self.diversity, self.free, out),
            "order": figures.order_figure(self.report, self.order, out),
        }
        names = {k: p.name for k, p in made.items() if p is not None}
        written = [p for p in made.values() if p is not None]
        try:
            (out / "report.json").write_text(
                json.dumps(self.to_dict(), ensure_ascii=False, allow_nan=False, indent=1) + "\n", encoding="utf-8"
            )
            (out / "report.md").write_text(self.markdown(names), encoding="utf-8")
        except OSError as e:
            raise OutputError(f"{folder}: cannot write the report: {e.strerror or e}") from None
        return [out / "report.md", out / "report.json", *written]
