"""Rich rendering at a fixed width against golden files (scripts/regen_golden.py writes them)."""

from __future__ import annotations

import csv
import importlib.util
import io
import re
from pathlib import Path

import pytest

from ministruct.diagnostics.render import (
    ROW_STYLES,
    TSV_COLUMNS,
    escape_token,
    fmt_prob,
    render_text,
    row_style,
    step_table,
    step_tsv,
)

GOLDEN = Path(__file__).resolve().parents[1] / "golden"


def _cases():
    spec = importlib.util.spec_from_file_location("ministruct_golden_cases_test", GOLDEN / "cases.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


CASES = _cases()


@pytest.mark.parametrize("name", sorted(CASES.CASES))
def test_matches_golden_file(name):
    path = GOLDEN / f"{name}.txt"
    assert path.exists(), f"missing {path}: run scripts/regen_golden.py"
    got = render_text(CASES.CASES[name](), width=CASES.WIDTH)
    assert got == path.read_text(encoding="utf-8"), f"{name}: output changed; if intended, run scripts/regen_golden.py"


@pytest.mark.parametrize("name", sorted(CASES.CASES))
def test_fits_the_width(name):
    for width in (60, 100):
        text = render_text(CASES.CASES[name](), width=width)
        assert max(len(line) for line in text.splitlines()) <= width


def test_escapes_are_visible():
    assert escape_token(" a\n\t\r\\") == "\u2423a\\n\\t\\r\\\\"
    assert escape_token("\x00\x7f") == "\\x00\\x7f"
    assert escape_token("\ufffd", b"\xe2\x80") == "\\xe2\\x80"
    assert escape_token("", b"\xc3\xa9\xff") == "\u00e9\\xff"
    assert escape_token("é") == "é"


def test_markup_is_not_interpreted():
    rec = CASES.RECORDS[4]
    assert "[bold]" in rec.token
    assert "[bold]Ada" in render_text(step_table([rec]), width=100)


def test_probabilities_format():
    assert fmt_prob(1.0) == "1.0000"
    assert fmt_prob(0.00042) == "4.2e-04"
    assert fmt_prob(0.0) == "0.0000"


def test_row_styles_follow_the_tag():
    by_step = {r.step: r for r in CASES.RECORDS}
    assert row_style(by_step[0]) == ROW_STYLES["forced"]
    assert row_style(by_step[4]) == ROW_STYLES["collapsed"]
    assert row_style(by_step[2]) == ROW_STYLES["changed"]
    assert row_style(by_step[5]) == ROW_STYLES["free"]
    assert len({ROW_STYLES[k] for k in ("forced", "collapsed", "changed", "free")}) == 4


def test_regen_script_check_passes():
    spec = importlib.util.spec_from_file_location(
        "regen_golden", Path(__file__).resolve().parents[2] / "scripts" / "regen_golden.py"
    )
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    assert module.main(["--check"]) == 0


def test_at_80_columns_the_step_table_is_compact_and_one_line_per_token():
    # issue 29: the 11-column table folded every cell at 80 columns (also the width when piped)
    text = render_text(step_table(CASES.RECORDS, title="8 tokens", width=80), width=80)
    lines = text.splitlines()
    assert max(len(line) for line in lines) <= 80
    header = next(line for line in lines if "|L|" in line)
    assert header.split() == ["#", "token", "id", "|L|", "Z", "KL", "tag", "nucleus", "flags", "µs"]
    rows = [line for line in lines if re.match(r"^ *\d+ +\S", line) and "→" in line]
    assert len(rows) == len(CASES.RECORDS)
    assert "140→1" in rows[4] and rows[4].split()[-2] == "CT"  # collapsed, top changed
    assert "C collapsed, N nucleus changed, T top token changed" in " ".join(" ".join(lines).split())


def test_the_tsv_table_carries_the_trace_names_and_values():
    text = step_tsv(CASES.RECORDS)
    rows = list(csv.DictReader(io.StringIO(text), delimiter="\t", quoting=csv.QUOTE_NONE))
    assert len(rows) == len(CASES.RECORDS) and list(rows[0]) == list(TSV_COLUMNS)
    for row, rec in zip(rows, CASES.RECORDS):
        assert int(row["token_id"]) == rec.token_id and int(row["legal_count"]) == rec.legal_count
        assert abs(float(row["Z"]) - rec.Z) < 1e-5 and row["collapsed"] == ("1" if rec.collapsed else "0")
        assert "\t" not in row["token"] and "\n" not in row["token"]
    assert rows[5]["token"] == "\\n\\t" and rows[4]["token"] == " [bold]Ada"
