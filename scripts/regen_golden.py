"""Regenerate the Rich golden files in tests/golden/ from tests/golden/cases.py.

    .venv/bin/python scripts/regen_golden.py          # rewrite every golden file
    .venv/bin/python scripts/regen_golden.py --check  # exit 1 if any differs

Never edit the .txt files by hand: change the case or the renderer, then rerun this.
"""

from __future__ import annotations

import argparse
import importlib.util
import sys
from pathlib import Path

GOLDEN = Path(__file__).resolve().parents[1] / "tests" / "golden"


def load_cases():
    """The tests/golden/cases.py module (not a package: loaded by path)."""
    spec = importlib.util.spec_from_file_location("ministruct_golden_cases", GOLDEN / "cases.py")
    module = importlib.util.module_from_spec(spec)
    assert spec.loader is not None
    spec.loader.exec_module(module)
    return module


def render_all() -> dict[str, str]:
    """name -> rendered text of every case."""
    from ministruct.diagnostics.render import render_text

    cases = load_cases()
    return {name: render_text(build(), width=cases.WIDTH) for name, build in cases.CASES.items()}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--check", action="store_true", help="compare instead of writing")
    args = ap.parse_args(argv)
    bad = 0
    for name, text in render_all().items():
        path = GOLDEN / f"{name}.txt"
        if args.check:
            if not path.exists() or path.read_text(encoding="utf-8") != text:
                print(f"differs: {path}", file=sys.stderr)
                bad += 1
        else:
            path.write_text(text, encoding="utf-8")
            print(f"wrote {path}")
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
