"""Write src/ministruct/grammar/regex/unicode_classes.json: the code points of `\\d \\D \\w
\\W \\s \\S` (with and without ASCII-only matching) and the cased code points, as Python's
`re` has them, scanned once here instead of in every process that meets them (the regex
front end scans them itself under a Python with another Unicode database).

    .venv/bin/python scripts/regen_unicode_classes.py
"""

from __future__ import annotations

import json
import sys
import unicodedata
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO / "src"))

from ministruct.grammar.regex.classes import (  # noqa: E402
    CATEGORY_LETTERS,
    SHIPPED_CLASSES,
    category_key,
    scan_cased,
    scan_category,
)


def tables() -> dict:
    ranges = {
        category_key(letter, ascii_only): scan_category(letter, ascii_only)
        for ascii_only in (False, True)
        for letter in CATEGORY_LETTERS
    }
    ranges["cased"] = scan_cased()
    return {
        "unidata_version": unicodedata.unidata_version,
        "python": ".".join(map(str, sys.version_info[:3])),
        "ranges": {k: [list(r) for r in v] for k, v in ranges.items()},
    }


def main() -> int:
    SHIPPED_CLASSES.write_text(json.dumps(tables(), separators=(",", ":")) + "\n", encoding="utf-8")
    print(f"wrote {SHIPPED_CLASSES.relative_to(REPO)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
