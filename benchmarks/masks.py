"""Token-mask speed of ministruct against llguidance and XGrammar, in one run, on the same
random walks (XGrammar when the `xgrammar` extra is installed: benchmarks/xgrammar_walk.py).

    .venv/bin/python benchmarks/masks.py                 # everything (a few minutes)
    .venv/bin/python benchmarks/masks.py --quick         # 5 schemas, 60 steps, no generation
    .venv/bin/python benchmarks/masks.py --json out.json # every number, per constraint

See benchmarks/README.md for the method, the targets and how to read the table.
"""

from __future__ import annotations

import argparse
import gc
import json
import random
import re
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Callable

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

import xgrammar_walk  # noqa: E402  (beside this file)
from model_files import model_path  # noqa: E402  (beside this file)

from ministruct.decode.gguf import bundled_model_path  # noqa: E402
from ministruct.decode.model import Model  # noqa: E402
from ministruct.diagnostics.bench import RESET, TimeStats, prepare_vocabulary, random_walk  # noqa: E402
from ministruct.engine.automaton import Automaton  # noqa: E402
from ministruct.engine.compile import compile_grammar  # noqa: E402
from ministruct.engine.matcher import Matcher  # noqa: E402
from ministruct.errors import MinistructError  # noqa: E402
from ministruct.grammar.constraint import load_constraint  # noqa: E402

SUITES = REPO / ".." / "shared" / "suites"
SCHEMA_BENCH = SUITES / "jsonschemabench"
LLAMACPP_GRAMMARS = SUITES / "llamacpp" / "grammars"
TARGET_MEAN_RATIO = 2.0
# the warm walk's seed is the first walk's plus this (seeds of the first walks are
# --seed + the constraint's place in the list: this one is none of them)
WARM_SEED = 1_000_003
TARGET_P99_US = 1000.0
TARGET_FIRST_MS = 20.0
TARGET_DECODE_LOSS = 0.05


# ---------------------------------------------------------------- memory (Linux)


def _status_kb(field_name: str) -> int:
    m = re.search(rf"^{field_name}:\s+(\d+)", Path("/proc/self/status").read_text(), re.M)
    return int(m.group(1)) if m else 0


def _trim() -> None:
    """Hand freed heap pages back to the OS (glibc), so a later peak is not hidden by reuse."""
    try:
        import ctypes

        ctypes.CDLL("libc.so.6").malloc_trim(0)
    except (OSError, AttributeError):
        pass


def measure_peak_mb(fn: Callable[[], Any]) -> float | None:
    """Extra peak RSS (MiB) while fn runs: resets the kernel's high-water mark first
    (/proc/self/clear_refs, Linux >= 4.0); None where that is not possible."""
    gc.collect()
    _trim()
    try:
        Path("/proc/self/clear_refs").write_text("5")
    except OSError:
        return None
    base = _status_kb("VmRSS")
    keep = fn()
    peak = _status_kb("VmHWM")
    del keep
    return max(peak - base, 0) / 1024


# ---------------------------------------------------------------- llguidance


class Llg:
    """llguidance on one grammar, walked in lockstep with ours (engine.bench.Companion)."""

    def __init__(self, tokenizer, grammar: str, n_logits: int, special: np.ndarray) -> None:
        import llguidance
        import llguidance.numpy as lnp

        self._lnp = lnp
        self._new = lambda: llguidance.LLMatcher(tokenizer, grammar, log_level=0)
        t0 = time.perf_counter()
        self.matcher = self._new()
        self.compile_ms = (time.perf_counter() - t0) * 1000
        if self.matcher.is_error():
            raise ValueError(self.matcher.get_error())
        self.n = n_logits
        self.special = special
        self.bitmask = lnp.allocate_token_bitmask(1, tokenizer.vocab_size)
        self.mask_us: list[float] = []
        self.ours: np.ndarray | None = None
        self.diverged = False
        self.rejected = 0
        self.steps_compared = 0
        self.steps_differ = 0  # any difference
        self.steps_differ_text = 0  # ignoring tokens llguidance treats as special
        self.steps_llg_extra = 0  # llguidance allows a (non-special) token we refuse
        self.tokens_ours_only = 0
        self.tokens_llg_only = 0

    def mask(self) -> np.ndarray:
        t0 = time.perf_counter()
        self._lnp.fill_next_token_bitmask(self.matcher, self.bitmask)
        self.mask_us.append((time.perf_counter() - t0) * 1e6)
        bits = np.unpackbits(self.bitmask[0].view(np.uint8), bitorder="little")
        out = np.zeros(self.n, dtype=bool)
        k = min(self.n, len(bits))
        out[:k] = bits[:k].astype(bool)
        return out

    # Companion protocol
    def legal(self) -> np.ndarray | None:
        if self.diverged:
            return None
        theirs = self.mask()
        if self.ours is not None:
            self._compare(np.asarray(self.ours), theirs)
        return theirs

    def _compare(self, ours: np.ndarray, theirs: np.ndarray) -> None:
        self.steps_compared += 1
        diff = ours != theirs
        if not diff.any():
            return
        self.steps_differ += 1
        text_diff = diff & ~self.special
        if text_diff.any():
            self.steps_differ_text += 1
            ours_only = int((text_diff & ours).sum())
            llg_only = int((text_diff & theirs).sum())
            self.tokens_ours_only += ours_only
            self.tokens_llg_only += llg_only
            self.steps_llg_extra += int(llg_only > 0)

    def advance(self, token: int) -> None:
        if not self.diverged and not self.matcher.consume_token(token):
            self.diverged = True
            self.rejected += 1

    def reset(self) -> None:
        if self.diverged:
            self.matcher = self._new()
            self.diverged = False
        else:
            self.matcher.reset()

    def replay(self, tokens: list[int], eog: frozenset[int]) -> None:
        """Recompute every mask along a recorded walk (for the memory pass)."""
        for t in tokens:
            self.mask()
            if t == RESET or t in eog:
                self.reset()
            else:
                self.advance(t)


def llg_tokenizer(model: Model):
    import llguidance.llamacpp

    vocab = model.vocabulary
    return llguidance.llamacpp.lltokenizer_from_vocab(
        model._vocab_p, n_vocab=vocab.n_logits, eos_token=sorted(vocab.eog_ids)
    )


# ---------------------------------------------------------------- constraints


@dataclass
class Spec:
    name: str
    kind: str  # regex | grammar | lark | schema | tools
    text: str  # pattern, GBNF or Lark text, schema JSON text, or tool list JSON text
    path: str | None = None
    group: str = ""  # "" for a named constraint, "jsonschemabench" for the sample

    def ours(self):
        if self.kind == "regex":
            return load_constraint(regex=self.text).grammar
        if self.kind == "grammar":
            return load_constraint(grammar=self.path).grammar
        if self.kind == "lark":
            return load_constraint(lark=self.path).grammar
        if self.kind == "tools":
            return load_constraint(tools=self.path, tool_choice="required", tool_format="json").grammar
        return load_constraint(schema=self.path).grammar

    def theirs(self) -> str:
        import llguidance

        if self.kind == "regex":
            return llguidance.grammar_from("regex", self.text)
        if self.kind == "grammar":
            return llguidance.grammar_from("gbnf", self.text)
        if self.kind == "lark":  # the same Lark text for both engines
            return llguidance.grammar_from("lark", self.text)
        if self.kind == "tools":
            return tools_lark(json.loads(self.text))
        return llguidance.LLMatcher.grammar_from_json_schema(self.text, overrides=llg_layout())


def llg_layout() -> dict:
    """llguidance's JSON Schema overrides for ministruct's default layout (the walks' tokens)."""
    item, key = xgrammar_walk.SCHEMA_SEPARATORS
    return {"whitespace_flexible": False, "item_separator": item, "key_separator": key}


def tools_lark(tools: list[dict]) -> str:
    """The same language as `--tools FILE --tool-choice required` in llguidance's own way: the
    name among constants, then one `%json` per tool (in ministruct's default layout, as ours)."""
    import llguidance

    layout = llg_layout()
    alts = []
    for t in tools:
        f = t["function"]
        schema = {**f["parameters"], "x-guidance": layout}
        alts.append(json.dumps(json.dumps(f["name"]) + ', "arguments": ') + " %json " + json.dumps(schema))
    return llguidance.grammar_from("lark", 'start: "{\\"name\\": " (' + " | ".join(alts) + ') "}"\n')


def grammar_file(name: str) -> Path:
    bundled = REPO / "grammars" / f"{name}.gbnf"
    return bundled if bundled.exists() else LLAMACPP_GRAMMARS / f"{name}.gbnf"


def named_specs(notes: list[str]) -> list[Spec]:
    specs = [Spec("[0-9]{4}", "regex", "[0-9]{4}")]
    conj = REPO / "samples" / "conj.json"
    if conj.exists():
        specs.append(Spec("conj.json", "schema", conj.read_text(), str(conj)))
    else:
        notes.append("samples/conj.json does not exist yet: skipped")
    for name in ("json", "arithmetic"):
        p = grammar_file(name)
        if p.exists():
            specs.append(Spec(f"{name}.gbnf", "grammar", p.read_text(), str(p)))
        else:
            notes.append(f"grammar {name}: no bundled or llama.cpp file: skipped")
    sql = Path(__file__).resolve().parent / "grammars" / "sql_select.lark"
    specs.append(Spec("sql_select.lark", "lark", sql.read_text(encoding="utf-8"), str(sql)))
    py = sql.with_name("python_expr.lark")
    specs.append(Spec("python_expr.lark", "lark", py.read_text(encoding="utf-8"), str(py)))
    tools = REPO / "samples" / "tools" / "many_200.json"
    specs.append(Spec("200 tools", "tools", tools.read_text(), str(tools)))
    return specs


def schema_sample(n: int, tokenizer, notes: list[str]) -> list[Spec]:
    """The first n schemas (in a fixed shuffle of the folder) that both engines compile."""
    if not SCHEMA_BENCH.is_dir():
        notes.append(f"{SCHEMA_BENCH} is missing: jsonschemabench skipped")
        return []
    import llguidance

    files = sorted(SCHEMA_BENCH.glob("*.json"))
    random.Random(0).shuffle(files)
    out: list[Spec] = []
    refused = {"ours": 0, "llguidance": 0}
    first_error = ""
    for f in files:
        if len(out) >= n:
            break
        schema = json.loads(f.read_text())["schema"]
        text = json.dumps(schema)
        spec = Spec(f.stem, "schema", text, None, group="jsonschemabench")
        try:
            spec.path = str(_schema_file(f, schema))
            Automaton(spec.ours())  # size limits are checked here, before any vocabulary
        except MinistructError as e:
            refused["ours"] += 1
            first_error = first_error or f"{f.stem}: {e}"
            continue
        except ImportError as e:
            notes.append(f"JSON Schema front end not importable ({e}): jsonschemabench skipped")
            return []
        if llguidance.LLMatcher(tokenizer, spec.theirs(), log_level=0).is_error():
            refused["llguidance"] += 1
            continue
        out.append(spec)
    notes.append(
        f"jsonschemabench: {len(out)} schemas used; refused before reaching {n}: "
        f"ministruct {refused['ours']}, llguidance {refused['llguidance']}"
        + (f" (first ministruct refusal: {first_error[:120]})" if first_error else "")
    )
    return out


_SCHEMA_DIR: Path | None = None


def _schema_file(src: Path, schema: Any) -> Path:
    """The schema alone, in a temporary folder (the suite files wrap it with test data)."""
    global _SCHEMA_DIR
    import tempfile

    if _SCHEMA_DIR is None:
        _SCHEMA_DIR = Path(tempfile.mkdtemp(prefix="ministruct-bench-"))
    p = _SCHEMA_DIR / src.name
    if not p.exists():
        p.write_text(json.dumps(schema))
    return p


# ---------------------------------------------------------------- one measurement


@dataclass
class Result:
    model: str
    spec: Spec
    steps: int = 0
    ours_compile_ms: float = 0.0
    llg_compile_ms: float = 0.0
    ours: TimeStats | None = None
    llg: TimeStats | None = None
    ours_first_ms: float = 0.0
    llg_first_ms: float = 0.0
    ours_mem_mb: float | None = None
    llg_mem_mb: float | None = None
    ours_us: list[float] = field(default_factory=list, repr=False)
    llg_us: list[float] = field(default_factory=list, repr=False)
    agreement: dict[str, int] = field(default_factory=dict)
    error: str | None = None
    # warm: a second walk (a new seed) in the same process, on the grammars the first filled
    ours_warm_us: list[float] = field(default_factory=list, repr=False)
    llg_warm_us: list[float] = field(default_factory=list, repr=False)
    xgr_warm_us: list[float] = field(default_factory=list, repr=False)
    xgr_compile_ms: float | None = None
    xgr_first_ms: float | None = None
    xgr_agreement: dict[str, int] = field(default_factory=dict)
    xgr_error: str | None = None

    def warm(self) -> dict[str, TimeStats | None]:
        return {
            k: TimeStats.of(v) if v else None
            for k, v in (
                ("ministruct", self.ours_warm_us),
                ("llguidance", self.llg_warm_us),
                ("xgrammar", self.xgr_warm_us),
            )
        }

    def to_dict(self) -> dict:
        return {
            "model": self.model,
            "constraint": self.spec.name,
            "kind": self.spec.kind,
            "group": self.spec.group,
            "steps": self.steps,
            "error": self.error,
            "ministruct": {
                "compile_ms": round(self.ours_compile_ms, 3),
                "first_mask_ready_ms": round(self.ours_first_ms, 3),
                "mask_us": self.ours.to_dict() if self.ours else None,
                "peak_mem_mb": self.ours_mem_mb,
            },
            "llguidance": {
                "compile_ms": round(self.llg_compile_ms, 3),
                "first_mask_ready_ms": round(self.llg_first_ms, 3),
                "mask_us": self.llg.to_dict() if self.llg else None,
                "peak_mem_mb": self.llg_mem_mb,
            },
            "agreement": self.agreement,
            "xgrammar": {
                "compile_ms": None if self.xgr_compile_ms is None else round(self.xgr_compile_ms, 3),
                "first_mask_ready_ms": None if self.xgr_first_ms is None else round(self.xgr_first_ms, 3),
                "agreement": self.xgr_agreement,
                "error": self.xgr_error,
            },
            "warm_mask_us": {k: v.to_dict() if v else None for k, v in self.warm().items()},
        }


def measure(model: Model, tokenizer, special: np.ndarray, spec: Spec, steps: int, seed: int, xgr: Any = None) -> Result:
    vocab = model.vocabulary
    res = Result(model.name, spec)
    try:
        t0 = time.perf_counter()
        grammar = spec.ours()
        compiled = compile_grammar(grammar, vocab, use_cache=False)
        res.ours_compile_ms = (time.perf_counter() - t0) * 1000
        t0 = time.perf_counter()
        theirs_text = spec.theirs()
        llg = Llg(tokenizer, theirs_text, vocab.n_logits, special)
        res.llg_compile_ms = (time.perf_counter() - t0) * 1000
    except (MinistructError, ValueError) as e:
        res.error = f"{type(e).__name__}: {e}"
        return res

    our_masks: list[np.ndarray] = []

    def on_step(_: int, mask: np.ndarray) -> None:
        llg.ours = mask  # noqa: F821  (bound in the try above; the except returns)
        if xgr is not None:
            our_masks.append(np.array(mask, dtype=bool))

    try:  # (a grammar whose parses multiply may pass the engine's limit mid-walk: python_expr.lark)
        walk = random_walk(compiled, steps, seed=seed, companion=llg, on_step=on_step)
    except MinistructError as e:
        res.error = f"{type(e).__name__} during the walk: {e}"
        return res
    res.steps = walk.steps
    res.ours_us, res.llg_us = walk.mask_us, llg.mask_us
    res.ours, res.llg = walk.stats(), TimeStats.of(llg.mask_us)
    res.ours_first_ms = res.ours_compile_ms + walk.first_mask_us / 1000
    res.llg_first_ms = res.llg_compile_ms + (llg.mask_us[0] / 1000 if llg.mask_us else 0.0)
    res.agreement = {
        "steps_compared": llg.steps_compared,
        "steps_differ": llg.steps_differ,
        "steps_differ_text": llg.steps_differ_text,
        "steps_llg_allows_more": llg.steps_llg_extra,
        "tokens_ours_only": llg.tokens_ours_only,
        "tokens_llg_only": llg.tokens_llg_only,
        "llg_rejected_our_token": llg.rejected,
    }
    tokens, eog = walk.tokens, vocab.eog_ids
    # warm: a new walk (a seed this process has not walked) on the grammars the first walk
    # filled, llguidance in lockstep; XGrammar takes the same new tokens
    llg.reset()
    llg.ours = None
    llg.mask_us = []
    try:
        warm = random_walk(compiled, steps, seed=seed + WARM_SEED, companion=llg)
    except MinistructError as e:
        res.error = f"{type(e).__name__} during the warm walk: {e}"
        return res
    res.ours_warm_us, res.llg_warm_us = warm.mask_us, llg.mask_us
    if xgr is not None:
        _measure_xgr(res, xgr, special, tokens, eog, our_masks, warm.tokens)
    our_masks.clear()
    del compiled, llg

    def ours_pass():
        c = compile_grammar(spec.ours(), vocab, use_cache=False)
        m = Matcher(c)
        for t in tokens:
            m.mask()
            if t == RESET or t in eog:
                m.reset()
            else:
                m.advance(t)
        return c

    def llg_pass():
        other = Llg(tokenizer, theirs_text, vocab.n_logits, special)
        other.replay(tokens, eog)
        return other

    res.ours_mem_mb = measure_peak_mb(ours_pass)
    res.llg_mem_mb = measure_peak_mb(llg_pass)
    return res


def _measure_xgr(
    res: Result, xgr, special: np.ndarray, tokens: list[int], eog, our_masks: list[np.ndarray], warm_tokens: list[int]
) -> None:
    """XGrammar on the same walks: compile, the first walk (compared with our masks), then
    the warm walk's tokens on the same compiled grammar."""
    try:
        compiled, res.xgr_compile_ms = xgr.compile(res.spec.kind, res.spec.text)
    except ValueError as e:
        res.xgr_error = str(e)[:200]
        return
    first = xgrammar_walk.XgrWalk(xgr, compiled, special)
    cold = first.replay(tokens, eog, our_masks if len(our_masks) == len(tokens) else None)
    res.xgr_first_ms = res.xgr_compile_ms + (cold[0] / 1000 if cold else 0.0)
    res.xgr_warm_us = xgrammar_walk.XgrWalk(xgr, compiled, special).replay(warm_tokens, eog)
    res.xgr_agreement = {
        "steps_compared": first.steps_compared,
        "steps_differ_text": first.steps_differ_text,
        "xgr_rejected_our_token": first.rejected,
    }


# ---------------------------------------------------------------- decode speed


def decode_speed(prompt: str, rounds: int, max_tokens: int) -> list[dict]:
    from ministruct.decode.loop import Decoder
    from ministruct.decode.sampling import SamplingParams
    from ministruct.diagnostics.bench import decode_rate
    from ministruct.jobs.job import GenerationJob

    model = Model.load(bundled_model_path(), n_ctx=1024, seed=0)
    out = []
    for label, kw in (
        ("regex [a-z ]{0,300}", {"regex": "[a-z ]{0,300}"}),
        ("json.gbnf", {"grammar": str(grammar_file("json"))}),
    ):
        c = load_constraint(**kw)
        job = GenerationJob(
            model, c, SamplingParams(temperature=0.7, top_p=0.9, seed=0), max_tokens=max_tokens, chat=True
        )
        ids = job.prompt_tokens(prompt)
        Decoder(model, ids, None, job.params, max_tokens=4).run()  # warm-up
        free, cons, ntok = [], [], []
        for r in range(rounds):
            free.append(decode_rate(Decoder(model, ids, None, job.params, max_tokens=max_tokens))[0])
            m = Matcher(compile_grammar(c.grammar, model.vocabulary, use_cache=False))
            rate, n = decode_rate(Decoder(model, ids, m, job.params, max_tokens=max_tokens))
            cons.append(rate)
            ntok.append(n)
        out.append(
            {
                "constraint": label,
                "unconstrained": float(np.median(free)),
                "constrained": float(np.median(cons)),
                "constrained_tokens": ntok,
                "rounds": rounds,
            }
        )
    model.close()
    return out


# ---------------------------------------------------------------- report


def _ratio(a: float, b: float) -> str:
    return f"{a / b:6.2f}" if b else "   n/a"


def _mem(x: float | None) -> str:
    return "  n/a" if x is None else f"{x:5.1f}"


def row(label: str, r: Result) -> str:
    o, l_ = r.ours, r.llg
    ag = r.agreement
    return (
        f"{label:<24} {o.mean:8.1f} {o.p50:7.1f} {o.p99:8.1f} {o.max:8.1f} | {l_.mean:6.1f} {l_.p99:6.1f} {l_.max:6.1f} | "
        f"{_ratio(o.mean, l_.mean)} {_ratio(o.p99, l_.p99)} | {r.ours_compile_ms:7.1f} {r.llg_compile_ms:6.1f} | "
        f"{r.ours_first_ms:7.1f} {r.llg_first_ms:6.1f} | {_mem(r.ours_mem_mb)} {_mem(r.llg_mem_mb)} | "
        f"{ag['steps_differ_text']:3d}/{ag['steps_compared']:<3d} {ag['steps_llg_allows_more']:3d}"
    )


HEADER = (
    f"{'constraint':<24} {'ours us: mean':>13} {'p50':>6} {'p99':>8} {'max':>8} | {'llg mean':>8} {'p99':>6} {'max':>6} | "
    f"{'ratio mean':>10} {'p99':>4} | {'compile ms':>10} {'llg':>3} | {'first ms':>8} {'llg':>4} | {'mem MB':>6} {'llg':>4} | "
    f"{'diff/steps':>10} {'llg+':>4}"
)


def pooled(results: list[Result], model: str) -> Result | None:
    rs = [r for r in results if r.spec.group == "jsonschemabench" and r.model == model and r.ours is not None]
    if not rs:
        return None
    agg = Result(model, Spec(f"{len(rs)} schemas (pooled)", "schema", "", group="pool"))
    agg.ours = TimeStats.of(x for r in rs for x in r.ours_us)
    agg.llg = TimeStats.of(x for r in rs for x in r.llg_us)
    agg.steps = sum(r.steps for r in rs)
    agg.ours_compile_ms = float(np.median([r.ours_compile_ms for r in rs]))
    agg.llg_compile_ms = float(np.median([r.llg_compile_ms for r in rs]))
    agg.ours_first_ms = float(np.median([r.ours_first_ms for r in rs]))
    agg.llg_first_ms = float(np.median([r.llg_first_ms for r in rs]))
    mems = [r.ours_mem_mb for r in rs if r.ours_mem_mb is not None]
    lmems = [r.llg_mem_mb for r in rs if r.llg_mem_mb is not None]
    agg.ours_mem_mb = max(mems) if mems else None
    agg.llg_mem_mb = max(lmems) if lmems else None
    agg.agreement = {k: sum(r.agreement.get(k, 0) for r in rs) for k in rs[0].agreement}
    both = [r for r in rs if r.xgr_warm_us]  # the warm pool: schemas XGrammar compiles too
    agg.ours_warm_us = [x for r in both for x in r.ours_warm_us]
    agg.llg_warm_us = [x for r in both for x in r.llg_warm_us]
    agg.xgr_warm_us = [x for r in both for x in r.xgr_warm_us]
    if both:
        agg.xgr_compile_ms = float(np.median([r.xgr_compile_ms for r in both]))
        agg.xgr_first_ms = float(np.median([r.xgr_first_ms for r in both]))
        agg.xgr_agreement = {k: sum(r.xgr_agreement.get(k, 0) for r in both) for k in both[0].xgr_agreement}
    agg.xgr_error = None if both else "no schema compiled by XGrammar"
    if not both:  # without XGrammar the warm pool is every schema
        agg.ours_warm_us = [x for r in rs for x in r.ours_warm_us]
        agg.llg_warm_us = [x for r in rs for x in r.llg_warm_us]
    agg.extra = {  # type: ignore[attr-defined]
        "compile_ms_max": max(r.ours_compile_ms for r in rs),
        "first_ms_max": max(r.ours_first_ms for r in rs),
        "llg_first_ms_max": max(r.llg_first_ms for r in rs),
        "schemas_mean_ratio_over_2": sum(1 for r in rs if r.llg.mean and r.ours.mean / r.llg.mean > 2),
        "schemas_p99_over_1ms": sum(1 for r in rs if r.ours.p99 > TARGET_P99_US),
        "schemas_in_warm_pool": len(both) or len(rs),
        "schemas_xgrammar_refused": sum(1 for r in rs if r.xgr_error),
    }
    return agg


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--steps", type=int, default=200, help="walk steps for the named constraints")
    ap.add_argument("--schema-steps", type=int, default=60, help="walk steps for each jsonschemabench schema")
    ap.add_argument("--schemas", type=int, default=50)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--models", default="smollm2,gemma3", help="comma list: smollm2, gemma3")
    ap.add_argument("--no-generate", action="store_true", help="skip the tokens/s measurement")
    ap.add_argument("--rounds", type=int, default=3, help="generations per condition for tokens/s")
    ap.add_argument("--max-tokens", type=int, default=64)
    ap.add_argument("--quick", action="store_true", help="5 schemas, 60 steps, no generation")
    ap.add_argument("--json", dest="json_out", help="write every number to this file")
    ap.add_argument("--no-xgrammar", action="store_true", help="leave XGrammar out even when installed")
    ap.add_argument(
        "--only",
        default="",
        help="comma list of named constraints to run (e.g. 'sql_select.lark,200 tools'); "
        "'pool' stands for the jsonschemabench sample; default: all",
    )
    args = ap.parse_args(argv)
    if args.quick:
        args.schemas, args.steps, args.schema_steps, args.no_generate = 5, 60, 30, True

    notes: list[str] = []
    results: list[Result] = []
    setup: list[dict] = []
    xgr_missing = None if args.no_xgrammar else xgrammar_walk.unavailable()
    if args.no_xgrammar:
        notes.append("XGrammar not measured (--no-xgrammar)")
    elif xgr_missing:
        notes.append(xgr_missing)
    for key in args.models.split(","):
        t0 = time.perf_counter()
        model = Model.load(model_path(key), vocab_only=True)
        vocab = model.vocabulary
        load_s = time.perf_counter() - t0
        trie_s = prepare_vocabulary(vocab).total_s
        t0 = time.perf_counter()
        tok = llg_tokenizer(model)
        tok_s = time.perf_counter() - t0
        warm_up(model, tok)
        special = np.zeros(vocab.n_logits, dtype=bool)
        special[[i for i in range(min(tok.vocab_size, vocab.n_logits)) if tok.is_special_token(i)]] = True
        setup.append(
            {
                "model": model.name,
                "n_vocab": vocab.n_logits,
                "load_vocab_s": round(load_s, 3),
                "ministruct_trie_s": round(trie_s, 3),
                "llguidance_tokenizer_s": round(tok_s, 3),
                "llguidance_special_tokens": int(special.sum()),
            }
        )
        xgr = None
        if not args.no_xgrammar and xgr_missing is None:
            xgr = xgrammar_walk.Xgr(vocab)
            setup[-1]["xgrammar_tokenizer_s"] = round(xgr.setup_s, 3)
            setup[-1]["xgrammar_version"] = xgrammar_walk.version()
        only = {x.strip() for x in args.only.split(",") if x.strip()}
        named = named_specs(notes if key == args.models.split(",")[0] else [])
        # each constraint's walk seed is its place in the whole list, so that --only reruns
        # the very walk of a full run
        specs = [(i, s) for i, s in enumerate(named) if not only or s.name in only]
        sample_notes: list[str] = []
        if not only or "pool" in only:
            specs += [(len(named) + j, s) for j, s in enumerate(schema_sample(args.schemas, tok, sample_notes))]
        notes += [f"{model.name}: {n}" for n in sample_notes]
        print(f"# {model.name}: {vocab.n_logits:,} tokens; {len(specs)} constraints", file=sys.stderr, flush=True)
        for i, spec in specs:
            steps = args.steps if spec.group == "" else args.schema_steps
            r = measure(model, tok, special, spec, steps, args.seed + i, xgr=xgr)
            if r.error:
                notes.append(f"{model.name} {spec.name}: {r.error[:200]}")
            if r.xgr_error and spec.group == "":
                notes.append(f"{model.name} {spec.name}: XGrammar: {r.xgr_error}")
            results.append(r)
        model.close()
        del tok, xgr
        gc.collect()

    decode = [] if args.no_generate else decode_speed("Describe a cat in a few words.", args.rounds, args.max_tokens)
    print_report(results, setup, decode, notes, args)
    if args.json_out:
        Path(args.json_out).write_text(
            json.dumps(
                {
                    "v": 1,
                    "setup": setup,
                    "results": [r.to_dict() for r in results],
                    "pooled": [
                        dict(pooled(results, s["model"]).to_dict(), **pooled(results, s["model"]).extra)  # type: ignore[union-attr]
                        for s in setup
                        if pooled(results, s["model"]) is not None
                    ],
                    "decode": decode,
                    "notes": notes,
                },
                indent=1,
            )
        )
    return 0


def warm_up(model: Model, tokenizer) -> None:
    """Pay once-per-process costs (front-end parser construction, first numpy calls over the
    trie, llguidance's lazy setup) before anything is timed: each front end and both
    engines run once on a throwaway constraint."""
    import llguidance

    for kw in ({"regex": "ab|c"}, {"grammar": str(grammar_file("arithmetic"))}):
        try:
            c = compile_grammar(load_constraint(**kw).grammar, model.vocabulary, use_cache=False)
            m = Matcher(c)
            m.mask()
        except MinistructError:
            pass
    try:  # the schema path as the constraints take it (file, validation, front end)
        warm = _schema_file(Path("warm-up.json"), {"type": "object", "properties": {"a": {"type": "integer"}}})
        c = compile_grammar(load_constraint(schema=str(warm)).grammar, model.vocabulary, use_cache=False)
        Matcher(c).mask()
    except Exception:
        pass
    llg = Llg(
        tokenizer,
        llguidance.grammar_from("regex", "ab|c"),
        model.vocabulary.n_logits,
        np.zeros(model.vocabulary.n_logits, dtype=bool),
    )
    llg.mask()


WARM_HEADER = (
    f"{'warm: a new walk':<24} {'ours mean':>9} {'p99':>7} | {'llg mean':>8} {'p99':>7} | {'xgr mean':>8} {'p99':>7} | "
    f"{'ours/best':>9} | {'xgr compile ms':>14} {'first ms':>8} | {'xgr diff/steps':>14} {'rej':>3}"
)


def warm_row(label: str, r: Result) -> str:
    w = r.warm()
    o, l_, x = w["ministruct"], w["llguidance"], w["xgrammar"]
    if o is None or l_ is None:
        return f"{label:<24} not measured"
    best = min(l_.mean, x.mean) if x is not None else l_.mean
    xs = f"{x.mean:8.1f} {x.p99:7.1f}" if x is not None else f"{'n/a':>8} {'':>7}"
    xc = (
        f"{r.xgr_compile_ms:14.1f} {r.xgr_first_ms:8.1f}"
        if r.xgr_compile_ms is not None and r.xgr_first_ms is not None
        else f"{'refused' if r.xgr_error else 'n/a':>14} {'':>8}"
    )
    ag = r.xgr_agreement
    xa = f"{ag['steps_differ_text']:6d}/{ag['steps_compared']:<7d} {ag['xgr_rejected_our_token']:3d}" if ag else ""
    return f"{label:<24} {o.mean:9.1f} {o.p99:7.1f} | {l_.mean:8.1f} {l_.p99:7.1f} | {xs} | {_ratio(o.mean, best):>9} | {xc} | {xa}"


def print_warm(results: list[Result], s: dict, agg: Result | None) -> None:
    """Warm masks (us): a new walk (another seed) on the grammars the first walk filled; best = the faster of llguidance and XGrammar."""
    print(WARM_HEADER)
    for r in results:
        if r.model == s["model"] and r.spec.group != "jsonschemabench" and r.ours is not None:
            print(warm_row(r.spec.name, r))
    if agg is not None:
        print(warm_row(f"{agg.extra['schemas_in_warm_pool']} schemas (pooled)", agg))  # type: ignore[attr-defined]
    print()


def print_report(results: list[Result], setup: list[dict], decode: list[dict], notes: list[str], args) -> None:
    print(
        "Mask time per step (us), first visits included (cold compile, no disk cache); "
        "llg = llguidance 1.9.1 on the same walk; ratio = ours / llguidance"
    )
    print(f"steps per walk: {args.steps} (named), {args.schema_steps} (each schema); seed {args.seed}\n")
    for s in setup:
        print(
            f"== {s['model']}  ({s['n_vocab']:,} tokens; vocab load {s['load_vocab_s']:.2f} s, "
            f"ministruct trie {s['ministruct_trie_s']:.2f} s, llguidance tokenizer {s['llguidance_tokenizer_s']:.2f} s)"
        )
        print(HEADER)
        for r in results:
            if r.model != s["model"] or r.spec.group == "jsonschemabench":
                continue
            print(row(r.spec.name, r) if r.ours else f"{r.spec.name:<24} error: {r.error}")
        agg = pooled(results, s["model"])
        if agg is not None:
            print(row(agg.spec.name, agg))
            x = agg.extra  # type: ignore[attr-defined]
            print(
                f"{'':<24} schemas: compile max {x['compile_ms_max']:.1f} ms, first mask ready max "
                f"{x['first_ms_max']:.1f} ms (llg {x['llg_first_ms_max']:.1f}); mean ratio > 2 in "
                f"{x['schemas_mean_ratio_over_2']}, p99 > 1 ms in {x['schemas_p99_over_1ms']}"
            )
        print()
        print_warm(results, s, agg)
    if decode:
        print("Decode speed, SmolLM2 (median tokens/s over rounds, first token to last; prefill excluded)")
        for d in decode:
            loss = 1 - d["constrained"] / d["unconstrained"]
            print(
                f"  {d['constraint']:<22} constrained {d['constrained']:6.1f}  unconstrained {d['unconstrained']:6.1f}  "
                f"slowdown {loss * 100:+5.1f}%  (tokens {d['constrained_tokens']})"
            )
        print()
    print("Targets")
    for s in setup:
        rs = [r for r in results if r.model == s["model"] and r.ours is not None and r.spec.group != "jsonschemabench"]
        agg = pooled(results, s["model"])
        if agg is not None:
            rs.append(agg)
        for r in rs:
            ratio = r.ours.mean / r.llg.mean if r.llg.mean else float("inf")
            ok_r = "ok  " if ratio <= TARGET_MEAN_RATIO else "MISS"
            ok_p = "ok  " if r.ours.p99 < TARGET_P99_US else "MISS"
            print(
                f"  {s['model'][:22]:<22} {r.spec.name:<24} mean ratio {ratio:6.2f} (<= 2) {ok_r}   "
                f"p99 {r.ours.p99:8.1f} us (< 1000) {ok_p}"
            )
        if s["n_vocab"] > 200_000:
            for r in results:
                if r.model == s["model"] and r.spec.name in ("conj.json", "json.gbnf") and r.ours is not None:
                    ok = "ok  " if r.ours_first_ms < TARGET_FIRST_MS else "MISS"
                    print(
                        f"  {s['model'][:22]:<22} {r.spec.name:<24} first mask ready {r.ours_first_ms:7.1f} ms (< {TARGET_FIRST_MS:.0f}) {ok}"
                    )
    for d in decode:
        loss = 1 - d["constrained"] / d["unconstrained"]
        ok = "ok  " if loss <= TARGET_DECODE_LOSS else "MISS"
        print(f"  decode {d['constraint']:<22} slowdown {loss * 100:+5.1f}% (<= 5%) {ok}")
    if notes:
        print("\nNotes")
        for n in notes:
            print(f"  - {n}")


if __name__ == "__main__":
    sys.exit(main())
