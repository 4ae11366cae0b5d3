"""Rich rendering of diagnostics: the per-token table, the summary, grammar and tokenizer reports.

Everything returns Rich renderables; nothing prints. Token text is shown with its
escapes visible (spaces as a visible mark, newlines as \\n, bytes that are not
UTF-8 alone as \\xNN), and never interpreted as Rich markup.
"""

from __future__ import annotations

from typing import Iterable, Sequence

from rich import box
from rich.console import Console, Group, RenderableType
from rich.panel import Panel
from rich.table import Table
from rich.text import Text

from ministruct.diagnostics.grammar_info import GrammarInfo
from ministruct.diagnostics.stats import FAST_FORWARD, FORCED, StepRecord, Summary
from ministruct.diagnostics.tokenizer import TokenizerReport

SPACE_MARK = "\u2423"  # ␣
ROW_STYLES = {"forced": "cyan", "fast_forward": "dim cyan", "collapsed": "bold red", "changed": "yellow", "free": ""}
FF_MARK = "\u00bb"  # », in front of a fast-forwarded row's tag
_ESCAPES = {"\n": "\\n", "\t": "\\t", "\r": "\\r", "\\": "\\\\", " ": SPACE_MARK}


def escape_token(text: str, data: bytes | None = None) -> str:
    """The token with whitespace, control characters and stray bytes made visible."""
    if data is not None:
        text = data.decode("utf-8", "surrogateescape")  # stray bytes -> U+DC80..U+DCFF
    return "".join(_escape_char(c) for c in text)


def _escape_char(c: str) -> str:
    if c in _ESCAPES:
        return _ESCAPES[c]
    o = ord(c)
    if 0xDC80 <= o <= 0xDCFF:
        return f"\\x{o - 0xDC00:02x}"
    if o < 0x20 or 0x7F <= o < 0xA0:
        return f"\\x{o:02x}"
    return c


def fmt_prob(x: float) -> str:
    """Four decimals, or scientific notation below 0.001."""
    return f"{x:.4f}" if x >= 1e-3 or x == 0 else f"{x:.1e}"


def row_style(rec: StepRecord) -> str:
    """Rows are colored by tag: forced, fast-forwarded, collapsed, nucleus changed, plain free."""
    if rec.tag == FAST_FORWARD:
        return ROW_STYLES["fast_forward"]
    if rec.tag == FORCED:
        return ROW_STYLES["forced"]
    if rec.collapsed:
        return ROW_STYLES["collapsed"]
    if rec.nucleus_changed:
        return ROW_STYLES["changed"]
    return ROW_STYLES["free"]


WIDE = 100  # columns the full step table needs; narrower consoles get the compact one
FLAG_LETTERS = {"collapsed": "C", "nucleus": "N", "top": "T"}
TSV_COLUMNS = (
    "step", "token", "token_id", "legal_count", "Z", "kl", "tag", "nucleus_raw", "nucleus_masked",
    "collapsed", "nucleus_changed", "top_changed", "mask_us",
)  # fmt: skip


def _flags(r: StepRecord) -> list[str]:
    out = ["collapsed"] if r.collapsed else ["nucleus"] if r.nucleus_changed else []
    return out + (["top"] if r.top_changed else [])


def step_table(records: Sequence[StepRecord], *, title: str | None = None, width: int = WIDE) -> Table:
    """One row per token: text, id, |L_t|, Z_t, KL, tag, nucleus raw/masked, flags, mask
    time; below WIDE columns, compact (nucleus as raw→masked, flags as letters, a legend)."""
    if width < WIDE:
        return _compact_step_table(records, title)
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, expand=False)
    t.add_column("#", justify="right")
    t.add_column("token", overflow="fold", min_width=8)
    t.add_column("id", justify="right")
    t.add_column("|L|", justify="right")
    t.add_column("Z", justify="right")
    t.add_column("KL", justify="right")
    t.add_column("tag")
    t.add_column("raw", justify="right", header_style="bold")
    t.add_column("masked", justify="right")
    t.add_column("flags")
    t.add_column("mask µs", justify="right")
    if any(r.tag == FAST_FORWARD for r in records):
        t.caption = f"{FF_MARK} ff: fast-forwarded (dictated by the grammar, evaluated in one batch, not drawn)"
        t.caption_justify = "left"
    if any(r.phase == "think" for r in records):
        note = "think: free text before the constraint (eog: the model's end-of-generation probability, close: "
        note += "the probability of tokens that write the closing tag on); the section line is the boundary"
        t.caption = f"{t.caption}\n{note}" if t.caption else note
        t.caption_justify = "left"
    for i, r in enumerate(records):
        token = Text(escape_token(r.token, r.token_bytes), style="italic" if r.control else "")
        flags = []
        boundary = r.phase == "think" and i + 1 < len(records) and records[i + 1].phase == "answer"
        if r.phase == "think":
            flags.append("think" + (" (ends it)" if boundary else ""))
            if r.eog_p is not None:
                flags.append(f"eog={fmt_prob(r.eog_p)} close={fmt_prob(r.close_p or 0.0)}")
        flags += _flags(r)
        t.add_row(
            str(r.step),
            token,
            str(r.token_id),
            f"{r.legal_count:,}",
            fmt_prob(r.Z),
            f"{r.kl:.3f}",
            f"{FF_MARK} ff" if r.tag == FAST_FORWARD else r.tag,
            f"{r.nucleus_raw:,}",
            f"{r.nucleus_masked:,}",
            " ".join(flags),
            f"{r.mask_us:,.0f}",
            style=row_style(r),
            end_section=boundary,
        )
    return t


def _compact_step_table(records: Sequence[StepRecord], title: str | None) -> Table:
    """The step table in about 70 columns (80 with long tokens)."""
    t = Table(title=title, box=box.SIMPLE_HEAD, pad_edge=False, expand=False, padding=(0, 1, 0, 0))
    for name, just in (("#", "right"), ("token", "left"), ("id", "right"), ("|L|", "right"), ("Z", "right")):
        t.add_column(name, justify=just, overflow="fold", max_width=14 if name == "token" else None)  # type: ignore[arg-type]
    for name, just in (("KL", "right"), ("tag", "left"), ("nucleus", "right"), ("flags", "left"), ("µs", "right")):
        t.add_column(name, justify=just)  # type: ignore[arg-type]
    legend = "nucleus: raw→masked size; flags: C collapsed, N nucleus changed, T top token changed"
    if any(r.tag == FAST_FORWARD for r in records):
        legend += f"; {FF_MARK}: fast-forwarded (dictated by the grammar, not drawn)"
    t.caption, t.caption_justify = legend, "left"
    for r in records:
        tag = FF_MARK if r.tag == FAST_FORWARD else "forced" if r.tag == FORCED else r.tag
        t.add_row(
            str(r.step),
            Text(escape_token(r.token, r.token_bytes), style="italic" if r.control else ""),
            str(r.token_id),
            f"{r.legal_count:,}",
            fmt_prob(r.Z),
            f"{r.kl:.2f}",
            tag,
            f"{r.nucleus_raw:,}→{r.nucleus_masked:,}",
            "".join(FLAG_LETTERS[f] for f in _flags(r)),
            f"{r.mask_us:,.0f}",
            style=row_style(r),
        )
    return t


def step_tsv(records: Sequence[StepRecord]) -> str:
    """The step table for a pipe: tab-separated values, a header line of TSV_COLUMNS (the
    trace records' names), one line per token (the token escaped as in the table)."""
    lines = ["\t".join(TSV_COLUMNS)]
    for r in records:
        row = r.to_record()
        row["token"] = escape_token(r.token, r.token_bytes).replace(SPACE_MARK, " ")
        lines.append("\t".join(_tsv_cell(row.get(k)) for k in TSV_COLUMNS))
    return "\n".join(lines) + "\n"


def _tsv_cell(v: object) -> str:
    if isinstance(v, bool):
        return "1" if v else "0"
    if isinstance(v, float):
        return f"{v:.6g}"
    return "" if v is None else str(v)


def summary_panel(
    s: Summary,
    *,
    output: str | None = None,
    stop_reason: str | None = None,
    complete: bool | None = None,
    notes: Iterable[str] = (),
) -> Panel:
    """The generation's aggregates (plus its output and stop reason when given)."""
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold")
    g.add_column()
    ff = f", {s.fast_forward} fast-forwarded" if s.fast_forward else ""
    g.add_row("steps", f"{s.steps} ({s.forced} forced, {s.free} free{ff})")
    rate = "n/a (no free steps)" if s.collapse_rate is None else f"{s.collapse_rate:.1%}"
    g.add_row("collapsed", f"{s.collapsed} of {s.free} free steps: {rate}")
    g.add_row("mask changed", f"nucleus {s.nucleus_changed}, top token {s.top_changed}")
    if s.mean_Z is not None:
        g.add_row("Z", f"mean {fmt_prob(s.mean_Z)}, lowest {fmt_prob(s.min_Z or 0.0)} at step {s.min_Z_step}")
    g.add_row("total KL", f"{s.total_kl:.3f} nats")
    if s.mask_us_mean is not None:
        g.add_row("mask time", f"{s.mask_us_mean:,.0f} µs per step (mean)")
    if output is not None:
        g.add_row("output", Text(escape_token(output).replace(SPACE_MARK, " ")))
    if stop_reason is not None:
        done = "" if complete is None else (", complete" if complete else ", incomplete")
        g.add_row("stopped", f"{stop_reason}{done}")
    for n in notes:
        g.add_row("note", Text(n))
    return Panel(g, title="summary", title_align="left", box=box.ROUNDED)


def tool_scores_table(scores: Sequence[dict]) -> Table:
    """Per call: the model's mass `p` and `share` on each tool name where the call picks it
    (jobs/tool_scores.py defines them), the generated name marked."""
    table = Table(title="tool choice", box=box.SIMPLE_HEAD)
    for col, justify in (("call", "right"), ("step", "right"), ("tool", "left"), ("p", "right"), ("share", "right")):
        table.add_column(col, justify=justify)  # type: ignore[arg-type]
    for i, call in enumerate(scores):
        ranked = sorted(call["scores"], key=lambda s: -s["p"])
        for j, s in enumerate(ranked):
            mark = "> " if s["name"] == call["chosen"] else "  "
            share = "-" if s["share"] is None else f"{s['share']:.1%}"
            table.add_row(
                str(i) if j == 0 else "",
                str(call["step"]) if j == 0 else "",
                mark + s["name"],
                fmt_prob(s["p"]),
                share,
                style="bold" if s["name"] == call["chosen"] else "",
            )
    return table


def grammar_report(info: GrammarInfo) -> Group:
    """Sizes and warnings, canonical GBNF, legal-set size distribution, sample strings."""
    c = info.constraint
    head = Table.grid(padding=(0, 2))
    head.add_column(style="bold")
    head.add_column()
    head.add_row("constraint", Text(f"{c.get('kind', '?')} ({c.get('source', '')})"))
    if "tool_format" in c:
        head.add_row("tool format", Text(c.get("tool_format_detected") or c["tool_format"]))
    if "think" in c:
        head.add_row("think", Text(f"{c['think'].get('open')!r} ... {c['think'].get('close')!r}"))
    head.add_row("rules", str(info.rules))
    st = info.stats
    head.add_row("automaton", f"{st.get('nfa_states', 0):,} NFA states, {st.get('byte_classes', 0)} byte classes")
    head.add_row("configurations", f"{st.get('configurations', 0):,} reached so far")
    if "compile_ms" in st:
        head.add_row("compile", f"{st['compile_ms']:,.1f} ms")
    if info.vocab_name or info.n_logits:
        head.add_row("vocabulary", f"{info.vocab_name} ({info.n_logits:,} logits rows)")
    for w in info.warnings:
        head.add_row(Text("warning", style="bold yellow"), Text(w))
    parts: list[RenderableType] = [Panel(head, title="grammar", title_align="left", box=box.ROUNDED)]
    parts.append(Panel(Text(info.gbnf.rstrip("\n")), title="canonical GBNF", title_align="left", box=box.ROUNDED))

    sizes = Table(
        title="legal-set sizes |L| over the configurations reached",
        box=box.SIMPLE_HEAD,
        title_justify="left",
        caption_justify="left",
        min_width=60,
    )
    sizes.add_column("|L|")
    sizes.add_column("configurations", justify="right")
    for label, count in info.legal.histogram():
        sizes.add_row(label, str(count))
    d = info.legal.to_dict()
    if d["configurations"]:
        sizes.caption = (
            f"min {d['min']:,}, median {d['median']:,.1f}, max {d['max']:,} over {d['configurations']} configurations"
        )
    parts.append(sizes)

    samples = Table(
        title="sample strings (seeded random walks)", box=box.SIMPLE_HEAD, title_justify="left", min_width=60
    )
    samples.add_column("#", justify="right")
    samples.add_column("text", overflow="fold")
    samples.add_column("tokens", justify="right")
    samples.add_column("complete")
    for i, w in enumerate(info.walks, 1):
        samples.add_row(str(i), Text(escape_token(w.text)), str(w.n_tokens), "yes" if w.complete else "no")
    parts.append(samples)
    return Group(*parts)


def tokenizer_panel(rep: TokenizerReport) -> Panel:
    """Vocabulary counts and notes, with a few examples."""
    g = Table.grid(padding=(0, 2))
    g.add_column(style="bold")
    g.add_column()
    g.add_row("vocabulary", Text(f"{rep.name}: {rep.n_tokens:,} tokens, {rep.n_logits:,} logits rows"))
    g.add_row("control", Text(f"{rep.control:,} (end of generation: {', '.join(rep.eog) or 'none'})"))
    if rep.invalid_utf8_examples:
        ex = ", ".join(f"{e['id']}={e['hex']}" for e in rep.invalid_utf8_examples)
        g.add_row("not UTF-8", Text(f"{rep.invalid_utf8:,} (e.g. {ex})"))
    if rep.duplicate_examples:
        ex = ", ".join(f"{escape_token(e['text'])!s}:{'/'.join(map(str, e['ids']))}" for e in rep.duplicate_examples)
        g.add_row("same bytes", Text(f"{rep.duplicate_bytes:,} (e.g. {ex})"))
    if rep.leading_space_examples:
        ex = ", ".join(f"{e['text']}:{'/'.join(map(str, e['ids']))}" for e in rep.leading_space_examples)
        g.add_row("leading space", Text(f"{rep.leading_space:,} (e.g. {ex})"))
    for n in rep.notes:
        g.add_row("note", Text(n))
    return Panel(g, title="tokenizer", title_align="left", box=box.ROUNDED)


def render_text(renderable: RenderableType, *, width: int = 100) -> str:
    """Plain text of a renderable at a fixed width (no color): for golden files and logs."""
    console = Console(width=width, force_terminal=False, color_system=None, record=True, file=_Null())
    console.print(renderable)
    return console.export_text()


class _Null:
    def write(self, s: str) -> int:
        return len(s)

    def flush(self) -> None:
        pass
