"""Per-token diagnostics from a server's logprobs: the chosen token's probability and a
lower bound on Z_t.

A server that returns `logprobs` with `top_logprobs` (llama-cpp-python takes them from
the model's distribution before the grammar) shows us the N most probable tokens at each
step. Z_t, the probability mass the constraint leaves legal at step t, needs the whole
vocabulary; among the returned tokens we can only find part of it. So each step record
carries ``Z_lower``: the mass of the returned top tokens that our engine accepts after
the text so far (legality by stepping the constraint's automaton on the token's bytes;
a token with no text counts as end of generation, legal where the text is complete).
It is a lower bound on Z_t, never an estimate of it. Without logprobs the record says so.

Trace records are JSONL like local `gen --trace`'s (`"type"`: header, step, summary), one
group per result, in input order.
"""

from __future__ import annotations

import math
from typing import Any

from ministruct.engine.automaton import automaton_for
from ministruct.fleet.dialects import TokenLogprob
from ministruct.grammar.constraint import Constraint


def logprob_steps(constraint: Constraint, tokens: list[TokenLogprob]) -> list[dict[str, Any]]:
    """One step record per generated token: `p` of the chosen token and `Z_lower`.

    Once the tokens leave the constraint's language (an unconstrained server), legality
    is undefined from there on: `Z_lower` is null.
    """
    a = automaton_for(constraint.grammar)
    config = a.initial
    out: list[dict[str, Any]] = []
    for t, tok in enumerate(tokens):
        alts: dict[bytes, float] = {}
        for text, lp in tok.top:
            alts.setdefault(text, lp)  # the chosen token may be listed again past the top N
        z_lower: float | None = None
        n_legal: int | None = None
        if config:
            z_lower, n_legal = 0.0, 0
            for text, lp in alts.items():
                legal = a.is_accepting(config) if not text else bool(a.step_bytes(config, text))
                if legal:
                    z_lower += math.exp(lp)
                    n_legal += 1
        out.append(
            {
                "type": "step",
                "step": t,
                "token": tok.token.decode("utf-8", "replace"),
                "logprob": tok.logprob,
                "p": math.exp(tok.logprob) if math.isfinite(tok.logprob) else 0.0,
                "top_n": len(alts),
                "legal_top": n_legal,
                "Z_lower": z_lower,
            }
        )
        if config:
            config = a.step_bytes(config, tok.token)
    return out


def trace_records(
    rid: Any,
    server: str | None,
    constraint: Constraint,
    sampling: dict[str, Any],
    top_logprobs: int,
    tokens: list[TokenLogprob] | None,
    summary: dict[str, Any],
) -> list[dict[str, Any]]:
    """The header, step and summary records of one result."""
    header = {
        "type": "header",
        "id": rid,
        "server": server,
        "constraint": constraint.describe(),
        "sampling": sampling,
        "top_logprobs": top_logprobs,
        "Z_lower_meaning": "legal mass among the returned top tokens: a lower bound on Z_t",
    }
    steps = logprob_steps(constraint, tokens) if tokens else []
    if tokens:
        note = None
    elif server is None:
        note = "no server answered"
    else:
        note = "the server returned no logprobs: no step records available"
    tail = {"type": "summary", "id": rid, "logprobs_available": bool(tokens), "n_steps": len(steps), **summary}
    if note:
        tail["note"] = note
    return [header, *steps, tail]
