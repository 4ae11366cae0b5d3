"""Deterministic inputs for the Rich golden files (hand-made, no model).

Each entry of CASES renders to tests/golden/<name>.txt at WIDTH columns. Regenerate
with `.venv/bin/python scripts/regen_golden.py`; never edit the .txt files by hand.
"""

from __future__ import annotations

from ministruct.diagnostics.bench import SampleWalk
from ministruct.diagnostics.grammar_info import GrammarInfo, LegalSizes
from ministruct.diagnostics.render import grammar_report, step_table, summary_panel, tokenizer_panel
from ministruct.diagnostics.stats import StepRecord, summarize
from ministruct.diagnostics.tokenizer import tokenizer_report
from ministruct.engine.vocab import Vocabulary

WIDTH = 100


def _rec(
    step,
    token_id,
    token,
    legal,
    z,
    kl,
    nr,
    nm,
    *,
    collapsed=False,
    changed=False,
    top=False,
    us=12.5,
    data=None,
    control=False,
) -> StepRecord:
    return StepRecord(
        step=step,
        token_id=token_id,
        token=token,
        legal_count=legal,
        Z=z,
        kl=kl,
        tag="forced" if legal == 1 else "free",
        nucleus_raw=nr,
        nucleus_masked=nm,
        collapsed=collapsed,
        nucleus_changed=changed,
        top_changed=top,
        mask_us=us,
        token_bytes=data,
        control=control,
    )


RECORDS = [
    _rec(0, 90, "{", 1, 0.9731, 0.02727, 3, 1, changed=True, us=1520.0),
    _rec(1, 1, '"', 1, 0.99995, 5.0e-5, 1, 1, us=8.0),
    _rec(2, 4521, "name", 4, 0.4123, 0.88600, 12, 2, changed=True, top=True),
    _rec(3, 17, '":', 1, 1.0, 0.0, 1, 1),
    _rec(4, 2834, " [bold]Ada", 48213, 0.00042, 7.7753, 140, 1, collapsed=True, changed=True, top=True),
    _rec(5, 221, "\n\t", 48213, 0.9990, 0.0010, 6, 6),
    _rec(6, 131, "\ufffd", 48213, 0.8, 0.22314, 9, 9, data=b"\xe2\x80", us=3.0),
    _rec(7, 2, "<|im_end|>", 2, 0.5, 0.69315, 2, 2, control=True, us=4000.25),
]


def step_table_case():
    return step_table(RECORDS, title="8 tokens, hand-made")


def summary_case():
    return summary_panel(
        summarize(RECORDS),
        output='{"name": "Ada"}',
        stop_reason="eos",
        complete=True,
        notes=["tokenizer note: re-tokenizing the output gives 5 ids instead of the 7 generated"],
    )


def summary_empty_case():
    return summary_panel(summarize([]))


def grammar_case():
    info = GrammarInfo(
        constraint={"kind": "regex", "source": "<regex>", "text": "[0-9]{4}"},
        gbnf="root ::= [0-9]{4}\n",
        rules=1,
        stats={"nfa_states": 9, "configurations": 6, "byte_classes": 3, "masks_cached": 5, "compile_ms": 12.25},
        warnings=["'x' is never used"],
        legal=LegalSizes([10, 10, 10, 1, 12000, 250]),
        walks=[SampleWalk("1984", 2, True), SampleWalk("20 1\n", 3, False)],
        vocab_name="toy",
        n_logits=16,
    )
    return grammar_report(info)


def tokenizer_case():
    vocab = Vocabulary.from_bytes(
        [b"", b"a", b" a", b"b", b" b", b"\xe2", b"\x80", b"a", b"\n", b"", b"<x>"],
        eog_ids=[0],
        control_ids=[10],
        control_text={0: "</s>", 10: "<x>"},
        n_logits=14,
        name="toy",
    )
    return tokenizer_panel(tokenizer_report(vocab))


CASES = {
    "step_table": step_table_case,
    "summary": summary_case,
    "summary_empty": summary_empty_case,
    "grammar_report": grammar_case,
    "tokenizer": tokenizer_case,
}
