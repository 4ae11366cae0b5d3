"""XGrammar on masks.py's walks: its masks timed along the very tokens ministruct's walk
took (the `xgrammar` extra; it imports torch). Skipped with a note when not installed.

XGrammar reads the vocabulary as ministruct does: each token's exact bytes (VocabType.RAW,
built from the GGUF by decode/gguf.py), control tokens empty (so XGrammar never allows them),
every end-of-generation id a stop token. Constraints it takes: JSON Schema (the separators of
ministruct's default layout, `SCHEMA_SEPARATORS`, as llguidance's in masks.py), regex, GBNF
(its EBNF reads llama.cpp's dialect, where it can) and Lark; the tool list (llguidance's
`%json` Lark) is not given to it.
"""

from __future__ import annotations

import json
import time
from typing import Any

import numpy as np

from ministruct.diagnostics.bench import RESET
from ministruct.grammar.schema.options import DEFAULT_WHITESPACE

# (item, key) separators of ministruct's default JSON layout, the one its walks take: a peer
# given other separators rejects the walk's first ": " and masks a dead matcher from there on
SCHEMA_SEPARATORS = {"spaced": (", ", ": "), "compact": (",", ":")}[DEFAULT_WHITESPACE]


def unavailable() -> str | None:
    """None when XGrammar imports, else why not (the note masks.py prints)."""
    try:
        import xgrammar  # noqa: F401
    except Exception as e:  # ImportError, or torch failing to load
        return f"XGrammar not measured ({type(e).__name__}: {e}); pip install -e '.[xgrammar]'"
    return None


def version() -> str:
    from importlib.metadata import version as v

    return v("xgrammar")


class Xgr:
    """XGrammar for one vocabulary: a TokenizerInfo and a GrammarCompiler (whose cache is
    turned off, so each constraint's compile is timed as a first one)."""

    def __init__(self, vocab: Any) -> None:
        import xgrammar as xgr

        self._xgr = xgr
        self.n = vocab.n_logits
        tokens = list(vocab.tokens) + [b""] * (vocab.n_logits - len(vocab.tokens))
        t0 = time.perf_counter()
        self.info = xgr.TokenizerInfo(
            tokens, xgr.VocabType.RAW, vocab_size=vocab.n_logits, stop_token_ids=sorted(vocab.eog_ids)
        )
        self.compiler = xgr.GrammarCompiler(self.info, max_threads=1, cache_enabled=False)
        self.setup_s = time.perf_counter() - t0

    def compile(self, kind: str, text: str) -> tuple[Any, float]:
        """(XGrammar's compiled grammar, compile ms); ValueError when it refuses or cannot take it."""
        t0 = time.perf_counter()
        try:
            if kind == "schema":
                compiled = self.compiler.compile_json_schema(
                    json.loads(text), any_whitespace=False, separators=SCHEMA_SEPARATORS, strict_mode=True
                )
            elif kind == "regex":
                compiled = self.compiler.compile_regex(text)
            elif kind == "grammar":
                compiled = self.compiler.compile_grammar(text)
            elif kind == "lark":
                compiled = self.compiler.compile_lark(text)
            else:
                raise ValueError(f"not given a {kind} constraint (no XGrammar form of it here)")
        except ValueError:
            raise
        except Exception as e:  # its own errors (RuntimeError...) for what it refuses
            raise ValueError(f"{type(e).__name__}: {str(e).splitlines()[0] if str(e) else ''}") from None
        return compiled, (time.perf_counter() - t0) * 1000


class XgrWalk:
    """One compiled grammar replayed along a recorded walk: mask times per step, and how
    its masks compare with ministruct's on the same steps."""

    def __init__(self, xgr: Xgr, compiled: Any, special: np.ndarray) -> None:
        self._x = xgr._xgr
        self._compiled = compiled
        self.n = xgr.n
        self.special = special
        self.matcher = self._x.GrammarMatcher(compiled)
        self.bitmask = self._x.allocate_token_bitmask(1, xgr.n)
        self.steps_compared = 0
        self.steps_differ_text = 0  # masks differ on a token that is not special
        self.rejected = 0  # it refused a token ministruct's walk took (the rest of that stretch unmeasured)

    def mask(self) -> tuple[np.ndarray, float]:
        t0 = time.perf_counter()
        self.matcher.fill_next_token_bitmask(self.bitmask)
        us = (time.perf_counter() - t0) * 1e6
        bits = np.unpackbits(self.bitmask.numpy()[0].view(np.uint8), bitorder="little")[: self.n]
        return bits.astype(bool), us

    def replay(self, tokens: list[int], eog: frozenset[int], ours: list[np.ndarray] | None = None) -> list[float]:
        """Mask times (us) along `tokens`; with `ours` (ministruct's mask at each step) count
        the steps where the two differ. A refused token stops the measurement until the
        walk restarts."""
        times: list[float] = []
        live = True
        for i, t in enumerate(tokens):
            if live:
                legal, us = self.mask()
                times.append(us)
                if ours is not None and i < len(ours):
                    self.steps_compared += 1
                    self.steps_differ_text += bool(((legal != ours[i]) & ~self.special).any())
            if t == RESET or t in eog:
                self.matcher = self._x.GrammarMatcher(self._compiled)
                live = True
            elif live and not self.matcher.accept_token(t):
                self.rejected += 1
                live = False
        return times
