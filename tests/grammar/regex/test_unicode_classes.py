"""The shipped sets of `\\d \\w \\s` (and their complements, ASCII-only too) and of the cased
code points equal what `re` says of every code point, on this Python."""

from __future__ import annotations

import json
import re
import unicodedata

import pytest

from ministruct.grammar.regex import classes
from ministruct.grammar.regex.classes import CATEGORY_LETTERS, SHIPPED_CLASSES, category_key


def _shipped_file() -> dict:
    return json.loads(SHIPPED_CLASSES.read_text(encoding="utf-8"))


def _matches(ranges: tuple[tuple[int, int], ...]) -> set[int]:
    return {c for lo, hi in ranges for c in range(lo, hi + 1)}


def test_the_shipped_file_names_every_set():
    data = _shipped_file()
    keys = {category_key(letter, a) for letter in CATEGORY_LETTERS for a in (False, True)} | {"cased"}
    assert set(data["ranges"]) == keys
    assert data["unidata_version"]


needs_same_database = pytest.mark.skipif(
    _shipped_file()["unidata_version"] != unicodedata.unidata_version,
    reason="the shipped sets were made with another Unicode database (they are scanned here instead)",
)


@needs_same_database
@pytest.mark.parametrize("ascii_only", [False, True])
@pytest.mark.parametrize("letter", list(CATEGORY_LETTERS))
def test_a_shipped_category_is_what_re_matches(letter, ascii_only):
    got = classes.category_ranges(letter, ascii_only)
    assert got == classes._shipped()[category_key(letter, ascii_only)]
    rx = re.compile(("(?a)" if ascii_only else "") + "\\" + letter)
    want = {c for c in range(classes.MAX_CODE_POINT + 1) if rx.fullmatch(chr(c))}
    assert _matches(got) == want


@needs_same_database
def test_the_shipped_cased_code_points_are_re_s():
    import _sre

    text, ranges = classes._cased()
    want = {c for c in range(classes.MAX_CODE_POINT + 1) if _sre.unicode_iscased(c)}
    assert _matches(ranges) == want
    assert {ord(ch) for ch in text} == want


def test_another_database_scans_instead(monkeypatch, tmp_path):
    other = tmp_path / "unicode_classes.json"
    data = _shipped_file()
    data["unidata_version"] = "0.0.0"
    data["ranges"]["d"] = [[48, 48]]  # wrong on purpose: it must not be read
    other.write_text(json.dumps(data))
    monkeypatch.setattr(classes, "SHIPPED_CLASSES", other)
    classes._shipped.cache_clear()
    try:
        assert classes.category_ranges("d") == classes.scan_category("d")
        assert (48, 57) in classes.category_ranges("d")
    finally:
        classes._shipped.cache_clear()
