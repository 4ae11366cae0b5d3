"""The engine side of benchmarks/maskbench.py: one engine, in a process of its own, replays
the tokens of valid instances through the schemas of a job file and prints one JSON line
per schema (a `start` line before it, so the parent knows where a crash or a time-out hit).

    python benchmarks/maskbench_engines.py ENGINE JOB START STOP      # ministruct | llguidance | xgrammar
    python benchmarks/maskbench_engines.py prepare JOB                # ministruct's vocabulary cache, warmed

How each engine is told the layout and the reading of properties (the job's `layout`:
`spaced` is json.dumps' ", " and ": ", `compact` is "," and ":"; no other whitespace):
- ministruct: `load_constraint(schema=FILE, whitespace=layout, extra_properties=...)`.
- llguidance: `LLMatcher.grammar_from_json_schema(schema, overrides={"whitespace_flexible":
  False, "item_separator": ..., "key_separator": ...})`.
- XGrammar: `compile_json_schema(schema, any_whitespace=False, separators=(..., ...),
  strict_mode=...)`, its `GrammarCompiler` on one thread with its cache off.

Per token, as MaskBench: the mask is computed (timed: `mask_us`), the instance's token is
looked up in it, and the engine is advanced with it (timed: `advance_us`); a token the
mask refuses ends that instance (`refused`). After the last token, untimed, whether the
mask allows end-of-generation (`end_ok`).
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))
sys.path.insert(0, str(Path(__file__).resolve().parent))

SEPARATORS = {"spaced": (", ", ": "), "compact": (",", ":")}


def _load_model(path: str):
    from ministruct.decode.model import Model

    return Model.load(path, vocab_only=True)


class Ministruct:
    """ministruct as a user meets it: the schema file read by the front end, compiled
    (the disk cache on, in a folder that holds no grammar), a Matcher per instance."""

    name = "ministruct"

    def __init__(self, job: dict) -> None:
        from ministruct.diagnostics.bench import prepare_vocabulary

        self.model = _load_model(job["model"])
        self.vocab = self.model.vocabulary
        prepare_vocabulary(self.vocab)
        self.options = {"whitespace": job["layout"], "extra_properties": job["properties"]}
        self.folder = Path(job["folder"])

    def compile(self, sid: str, schema: Any) -> Any:
        from ministruct.engine.compile import compile_grammar
        from ministruct.grammar.constraint import load_constraint

        path = self.folder / f"{sid}.json"  # written by the parent, read here as `--schema FILE` would
        return compile_grammar(load_constraint(schema=str(path), **self.options).grammar, self.vocab)

    def start(self, compiled: Any) -> Any:
        from ministruct.engine.matcher import Matcher

        return Matcher(compiled)

    def mask(self, m: Any) -> np.ndarray:
        return m.mask()

    @staticmethod
    def allows(mask: np.ndarray, t: int) -> bool:
        return bool(mask[t])

    def advance(self, m: Any, t: int) -> bool:
        m.advance(t)
        return True

    def end_ok(self, mask: np.ndarray) -> bool:
        return bool(mask[sorted(self.vocab.eog_ids)].any())


class Llguidance:
    """llguidance 1.9.1: its tokenizer built from the same GGUF (`lltokenizer_from_vocab`),
    an `LLMatcher` per schema (the compile), a `deep_copy()` of it per instance (as
    MaskBench copies its interpreter)."""

    name = "llguidance"

    def __init__(self, job: dict) -> None:
        import llguidance
        import llguidance.llamacpp
        import llguidance.numpy as lnp

        self._llg, self._lnp = llguidance, lnp
        self.model = _load_model(job["model"])
        vocab = self.model.vocabulary
        self.eog = sorted(vocab.eog_ids)
        self.tokenizer = llguidance.llamacpp.lltokenizer_from_vocab(
            self.model._vocab_p, n_vocab=vocab.n_logits, eos_token=self.eog
        )
        item, key = SEPARATORS[job["layout"]]
        self.overrides = {"whitespace_flexible": False, "item_separator": item, "key_separator": key}
        self.bitmask = lnp.allocate_token_bitmask(1, self.tokenizer.vocab_size)

    def compile(self, sid: str, schema: Any) -> Any:
        grammar = self._llg.LLMatcher.grammar_from_json_schema(json.dumps(schema), overrides=self.overrides)
        m = self._llg.LLMatcher(self.tokenizer, grammar, log_level=0)
        if m.is_error():
            raise ValueError(m.get_error())
        return m

    def start(self, compiled: Any) -> Any:
        return compiled.deep_copy()

    def mask(self, m: Any) -> np.ndarray:
        self._lnp.fill_next_token_bitmask(m, self.bitmask)
        return self.bitmask

    @staticmethod
    def allows(mask: np.ndarray, t: int) -> bool:
        return bool((int(mask[0, t >> 5]) >> (t & 31)) & 1)

    def advance(self, m: Any, t: int) -> bool:
        return bool(m.consume_token(t))

    def end_ok(self, mask: np.ndarray) -> bool:
        return any(self.allows(mask, t) for t in self.eog)


class Xgrammar:
    """XGrammar 0.2.8: a `TokenizerInfo` of the same GGUF's token bytes (benchmarks/
    xgrammar_walk.py: `VocabType.RAW`, control tokens empty, the end-of-generation ids as
    stop tokens), a `GrammarMatcher` per instance."""

    name = "xgrammar"

    def __init__(self, job: dict) -> None:
        import xgrammar
        import xgrammar_walk

        self._x = xgrammar
        self.model = _load_model(job["model"])
        vocab = self.model.vocabulary
        self.eog = sorted(vocab.eog_ids)
        self.xgr = xgrammar_walk.Xgr(vocab)
        self.separators = SEPARATORS[job["layout"]]
        self.strict = job["properties"] == "explicit"
        self.bitmask = xgrammar.allocate_token_bitmask(1, vocab.n_logits)
        self.bits = self.bitmask.numpy()  # the same memory

    def compile(self, sid: str, schema: Any) -> Any:
        return self.xgr.compiler.compile_json_schema(
            json.dumps(schema), any_whitespace=False, separators=self.separators, strict_mode=self.strict
        )

    def start(self, compiled: Any) -> Any:
        return self._x.GrammarMatcher(compiled)

    def mask(self, m: Any) -> np.ndarray:
        m.fill_next_token_bitmask(self.bitmask)
        return self.bits

    @staticmethod
    def allows(mask: np.ndarray, t: int) -> bool:
        return bool((int(mask[0, t >> 5]) >> (t & 31)) & 1)

    def advance(self, m: Any, t: int) -> bool:
        return bool(m.accept_token(t))

    def end_ok(self, mask: np.ndarray) -> bool:
        return any(self.allows(mask, t) for t in self.eog)


ENGINES = {e.name: e for e in (Ministruct, Llguidance, Xgrammar)}


def run_schema(engine: Any, item: dict, token_text) -> dict:
    """One schema: its compile, then every valid instance's tokens replayed."""
    clock = time.perf_counter
    rec: dict[str, Any] = {"id": item["id"]}
    t0 = clock()
    try:
        compiled = engine.compile(item["id"], item["schema"])
    except Exception as e:  # each engine's own refusal (SchemaError, ValueError, RuntimeError...)
        rec["error"] = f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}"[:300]
        return rec
    rec["compile_us"] = round((clock() - t0) * 1e6, 1)
    rec["instances"] = []
    for tokens in item["instances"]:
        m = engine.start(compiled)
        mask_us: list[float] = []
        advance_us: list[float] = []
        refused = None
        for i, t in enumerate(tokens):
            t0 = clock()
            mask = engine.mask(m)
            t1 = clock()
            mask_us.append(round((t1 - t0) * 1e6, 2))
            if not engine.allows(mask, t):
                refused = {"at": i, "token": t, "text": token_text(t), "after": token_text(tokens[max(0, i - 6) : i])}
                break
            t2 = clock()
            ok = engine.advance(m, t)
            advance_us.append(round((clock() - t2) * 1e6, 2))
            if not ok:
                refused = {"at": i, "token": t, "text": token_text(t), "after": "(the mask allowed it)"}
                break
        inst: dict[str, Any] = {"n": len(tokens), "mask_us": mask_us, "advance_us": advance_us, "refused": refused}
        if refused is None:
            inst["end_ok"] = engine.end_ok(engine.mask(m))
        rec["instances"].append(inst)
    return rec


def main(argv: list[str]) -> int:
    kind, job = argv[0], json.loads(Path(argv[1]).read_text())
    engine = ENGINES["ministruct" if kind == "prepare" else kind](job)
    vocab = engine.model.vocabulary

    def token_text(t: int | list[int]) -> str:
        ids = [t] if isinstance(t, int) else t
        return vocab.decode(ids).decode("utf-8", "replace")

    run_schema(engine, job["warmup"], token_text)  # first calls of every code path, untimed
    if kind == "prepare":
        return 0
    for i in range(int(argv[2]), int(argv[3])):
        print(json.dumps({"event": "start", "i": i}), flush=True)
        rec = run_schema(engine, job["schemas"][i], token_text)
        print(json.dumps({"event": "done", "i": i, "record": rec}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
