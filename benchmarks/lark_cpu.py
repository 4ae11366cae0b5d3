"""Where a Lark grammar's mask time goes, in CPU time, beside llguidance's on the same walks.

Each walk is a fresh compile (no disk cache) and a seeded 200-step random walk, as
`ministruct bench` takes it (tokens drawn from our masks); llguidance then computes its
mask at every step of the same tokens. Both are timed in this thread's CPU time
(time.thread_time), so the ratio holds on a machine other jobs are loading, where wall
times swing (startup.py's fresh processes and masks.py time wall clocks). Our time is
split by stage: the compiled trie walk (kernel.py), the transition table's rows and cells
made for it in Python (walk._fill_wanted: with greedy lexemes, mostly the boundaries
between lexemes), and the rest (mask assembly, cache lookups).

    .venv/bin/python benchmarks/lark_cpu.py [--models smollm2,gemma3] [--seeds 6]
                                            [--grammars sql_select.lark,python_expr.lark]
                                            [--unstepped]

--unstepped adds what making the configurations cost (Automaton.step and settle, the
closures of Transitions._target, Transitions.intern: CPU time per configuration made), and
how much of it went to configurations nothing stepped from (no cell of their row known at
the end of the walk: tokens ended there, or nothing read them). That share bounds what not
interning such configurations could save (an upper bound: nested calls count twice, and
the patched functions cost more than the real ones).

In process: module imports, the vocabulary's trie and the compiled walk are loaded before
the clock, and the first walk of a process pays some first-touch costs the later ones do
not (a fresh `bench` process pays them every time: startup.py measures that).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections import Counter
from pathlib import Path

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(REPO / "benchmarks"))

import masks  # noqa: E402  (beside this file)
from model_files import model_path  # noqa: E402

from ministruct.decode.model import Model  # noqa: E402
from ministruct.diagnostics.bench import RESET, prepare_vocabulary, random_walk  # noqa: E402
from ministruct.engine import kernel, walk  # noqa: E402
from ministruct.engine.compile import compile_grammar  # noqa: E402

STEPS = 200
ROWS = "rows and cells (Python)"


class Stages:
    """CPU seconds spent in named functions while they are patched in (`timed`)."""

    def __init__(self) -> None:
        self.s: Counter[str] = Counter()
        self.made: dict | None = None  # configuration -> CPU seconds making it (--unstepped)
        self.unstepped = Counter()  # seconds and counts, summed over walks (--unstepped)

    def making(self) -> None:
        """Time the functions that make configurations, per configuration made (--unstepped)."""
        from ministruct.engine.automaton import Automaton
        from ministruct.engine.table import Transitions

        made: dict = {}
        self.made = made

        def per_config(owner: object, name: str, only_new: bool = False) -> None:
            f = getattr(owner, name)

            def run(obj, *args):
                new = not only_new or args[0] not in obj.ids
                t0 = time.thread_time()
                out = f(obj, *args)
                if new:
                    key = args[0] if only_new else out
                    made[key] = made.get(key, 0.0) + time.thread_time() - t0
                return out

            setattr(owner, name, run)

        per_config(Automaton, "step")
        per_config(Automaton, "settle")
        per_config(Transitions, "_target")
        per_config(Transitions, "intern", only_new=True)

    def count_unstepped(self, compiled) -> None:
        """Add up this walk's making costs, and those of configurations never stepped from."""
        from ministruct.engine.table import UNKNOWN

        tr = compiled.transitions
        n = len(tr.configs)
        stepped = (tr.table[:n] != UNKNOWN).any(axis=1).tolist()
        made = self.made or {}
        for cid, config in enumerate(tr.configs[1:], start=1):
            t = made.get(config, 0.0)
            self.unstepped["made s"] += t
            self.unstepped["made"] += 1
            if not stepped[cid]:
                self.unstepped["unstepped s"] += t
                self.unstepped["unstepped"] += 1
        made.clear()

    def timed(self, owner: object, name: str, stage: str) -> None:
        f = getattr(owner, name)

        def run(*args, **kwargs):
            t0 = time.thread_time()
            try:
                return f(*args, **kwargs)
            finally:
                self.s[stage] += time.thread_time() - t0

        setattr(owner, name, run)


def one_walk(model: Model, tok, spec: masks.Spec, seed: int, stages: Stages) -> tuple[list[float], list[float]]:
    """(our CPU us per step, llguidance's CPU us per step) on one seeded walk."""
    vocab = model.vocabulary
    compiled = compile_grammar(spec.ours(), vocab, use_cache=False)
    ours: list[float] = []
    mask = compiled.mask

    def timed_mask(cid: int) -> np.ndarray:
        t0 = time.thread_time()
        try:
            return mask(cid)
        finally:
            ours.append((time.thread_time() - t0) * 1e6)

    compiled.mask = timed_mask  # type: ignore[method-assign]
    tokens = random_walk(compiled, STEPS, seed=seed).tokens
    if stages.made is not None:
        stages.count_unstepped(compiled)
    llg = masks.Llg(tok, spec.theirs(), vocab.n_logits, np.zeros(vocab.n_logits, dtype=bool))
    theirs: list[float] = []
    for t in tokens:
        t0 = time.thread_time()
        llg._lnp.fill_next_token_bitmask(llg.matcher, llg.bitmask)
        theirs.append((time.thread_time() - t0) * 1e6)
        if t == RESET or t in vocab.eog_ids:
            llg.reset()
        else:
            llg.advance(t)
    return ours, theirs


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--models", default="smollm2,gemma3")
    ap.add_argument("--grammars", default="sql_select.lark,python_expr.lark")
    ap.add_argument("--seeds", type=int, default=6, help="walks per grammar (seeds 0 to N-1)")
    ap.add_argument("--unstepped", action="store_true", help="what configurations nothing steps from cost to make")
    args = ap.parse_args(argv)
    wanted = [g.strip() for g in args.grammars.split(",") if g.strip()]
    specs = [s for s in masks.named_specs([]) if s.name in wanted]
    stages = Stages()
    stages.timed(kernel, "call", "trie walk (compiled)")
    stages.timed(walk, "_fill_wanted", ROWS)
    if args.unstepped:
        stages.making()
    print(f"CPU time per step (us), {STEPS}-step walks, seeds 0-{args.seeds - 1}; ratio = ours / llguidance")
    print("'no rows': the ratio if the rows and cells made in Python cost nothing (the rest of our time stays)")
    print(
        f"{'model':8s} {'grammar':18s} {'ours mean':>9s} {'p99':>7s} {'llg mean':>8s} {'p99':>6s} {'ratio':>6s} "
        f"{'no rows':>7s} | ours split"
    )
    for key in args.models.split(","):
        model = Model.load(model_path(key), vocab_only=True)
        prepare_vocabulary(model.vocabulary)
        tok = masks.llg_tokenizer(model)
        masks.warm_up(model, tok)
        for spec in specs:
            stages.s.clear()
            stages.unstepped.clear()
            ours: list[float] = []
            theirs: list[float] = []
            for seed in range(args.seeds):
                a, b = one_walk(model, tok, spec, seed, stages)
                ours += a
                theirs += b
            o, t = np.asarray(ours), np.asarray(theirs)
            total = o.sum() / 1e6
            split = ", ".join(f"{k} {v / total:.0%}" for k, v in stages.s.items())
            rest = 1 - sum(stages.s.values()) / total
            python = stages.s[ROWS] / total
            print(
                f"{key:8s} {spec.name:18s} {o.mean():9.1f} {np.percentile(o, 99):7.0f} {t.mean():8.1f} "
                f"{np.percentile(t, 99):6.0f} {o.mean() / t.mean():6.2f} {o.mean() * (1 - python) / t.mean():7.2f} "
                f"| {split}, other {rest:.0%}",
                flush=True,
            )
            if args.unstepped:
                u = stages.unstepped
                print(
                    f"{'':8s} {'':18s} making configurations: {u['made s'] / total:.0%} of our mask CPU "
                    f"({u['made']:,} made); never stepped from: {u['unstepped s'] / total:.0%} "
                    f"({u['unstepped']:,}, {u['unstepped'] / max(u['made'], 1):.0%} of those made)",
                    flush=True,
                )
        model.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
