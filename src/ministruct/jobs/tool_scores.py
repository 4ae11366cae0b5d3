"""Which tool the model wanted: its mass on each tool name where the call picks the tool.

For each call of an output, and each tool the call could have named (a name `n`, its
target bytes `n"`: the name and the character the markup writes after it, its closing
quote in JSON, so a name that is a prefix of another is told apart), over the steps of
the generated path from the first one whose legal tokens reach into the name, to the one
that finishes the generated name:

    m_s(n) = sum of p_s(t) over the legal tokens t of step s whose bytes, written after the
             output so far, stay consistent with `n"` (up to its end, or short of the name)
    p(n)   = the product of m_s(n) over the steps from the first one, as long as the
             generated token itself was consistent with `n"` (the step where the generated
             path leaves n, or finishes it, is the last factor)

p_s is the model's own distribution at step s (softmax of the logits, temperature 1, no
mask, no truncation). For the generated name, p(n) chains the model's agreement with it
over every step of the name; for another name it chains the shared steps and ends with
the mass that turned towards n where the path left it. When each name is one token after
a common prefix, p(n) is exactly the model's probability of that name's token. `share`
is p(n) over the sum of p over the call's names. A name is reached in every tokenization
the grammar allows, so a name's mass counts all of its spellings at each step.
"""

from __future__ import annotations

import weakref
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import numpy as np

from ministruct.decode.sampling import log_sum_exp
from ministruct.engine.vocab import Vocabulary
from ministruct.grammar.tools import ReadCalls, ToolSpec, name_target

if TYPE_CHECKING:
    from ministruct.decode.loop import Step

MAX_KEPT = 4096  # legal sets up to this size are kept whole; larger ones keep the tokens holding a quote


@dataclass
class _Seen:
    index: int
    offset: int  # output bytes before this step
    token: bytes
    ids: np.ndarray
    probs: np.ndarray


class ToolScorer:
    """Watches a generation's steps; `scores(read)` gives `tool_scores` for its calls."""

    def __init__(self, spec: ToolSpec, vocab: "Vocabulary") -> None:
        self.spec = spec
        self.vocab = vocab
        self._steps: list[_Seen] = []
        self._offset = 0
        self._lengths, self._quoted = _token_facts(vocab)

    def observe(self, step: "Step") -> None:
        if step.mask is None:
            return
        ids = np.flatnonzero(step.mask[: self.vocab.n_tokens])
        if len(ids) > MAX_KEPT:
            ids = ids[self._quoted[ids]]
        z = step.logits.astype(np.float64)
        probs = np.exp(z[ids] - log_sum_exp(z))
        self._steps.append(_Seen(step.index, self._offset, step.token, ids, probs))
        self._offset += len(step.token)

    def scores(self, read: ReadCalls, output: bytes, *, shift: int = 0) -> list[dict[str, Any]]:
        """One entry per call: the step where the choice starts, the name generated and
        each allowed tool's `p` and `share` (the module docstring defines them). `shift`:
        the characters of `output` before the text the calls were read from (a thinking part)."""
        text = output.decode("utf-8", "replace")
        names = [t.name for t in self.spec.allowed]
        out = []
        for call in read.calls:
            start = len(text[: call.name_offset + shift].encode("utf-8"))
            out.append(self._one(call.name, start, names, output))
        return out

    def _one(self, chosen: str, start: int, names: list[str], output: bytes) -> dict[str, Any]:
        targets = {n: name_target(self.spec, n) for n in names}
        chain = {n: 1.0 for n in names}
        alive = set(names)
        first: int | None = None
        for s in self._steps:
            if not alive:
                break
            written = output[s.offset : start]  # what this step's tokens must repeat before the name
            if s.offset < start and not (self._lengths[s.ids] > len(written)).any():
                continue
            reach = [self.vocab.tokens[i] for i in s.ids]
            if s.offset >= start + max(len(targets[n]) for n in alive):
                break
            if first is None:
                first = s.index
            before = output[start : s.offset] if s.offset > start else b""
            for n in list(alive):
                tgt = targets[n]
                mass = 0.0
                for b, p in zip(reach, s.probs):
                    if _consistent(before, written, b, tgt):
                        mass += float(p)
                chain[n] *= mass
                if not _consistent(before, written, s.token, tgt) or len(before) + len(s.token) - len(written) >= len(
                    tgt
                ):
                    alive.discard(n)
        total = sum(chain.values())
        return {
            "step": first,
            "chosen": chosen,
            "scores": [
                {"name": n, "p": _round(chain[n]), "share": _round(chain[n] / total) if total > 0 else None}
                for n in names
            ],
        }


_FACTS: "weakref.WeakKeyDictionary[Vocabulary, tuple[np.ndarray, np.ndarray]]" = weakref.WeakKeyDictionary()


def _token_facts(vocab: "Vocabulary") -> tuple[np.ndarray, np.ndarray]:
    """Per token of `vocab`: its length in bytes, and whether it holds a quote (once per vocabulary)."""
    facts = _FACTS.get(vocab)
    if facts is None:
        n = vocab.n_tokens
        lengths = np.fromiter((len(t) for t in vocab.tokens), dtype=np.int64, count=n)
        quoted = np.fromiter((b'"' in t for t in vocab.tokens), dtype=bool, count=n)
        facts = _FACTS[vocab] = (lengths, quoted)
    return facts


def _consistent(before: bytes, written: bytes, token: bytes, target: bytes) -> bool:
    """Whether `token`, at a step that still had `written` to repeat before the name (or
    had already written `before` of it), keeps the name region compatible with `target`."""
    if written:
        if len(token) <= len(written):
            return True  # it ends before the name: every name is still open
        inside = token[len(written) :]
    else:
        inside = before + token
    n = min(len(inside), len(target))
    return inside[:n] == target[:n]


def _round(x: float) -> float:
    return float(f"{x:.6g}")
