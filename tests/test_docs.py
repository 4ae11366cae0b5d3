"""The docs that are generated stay true: docs/commands.md is every command's --help."""

from __future__ import annotations

import importlib.util
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]


def _generator():
    spec = importlib.util.spec_from_file_location(
        "gen_command_reference", REPO / "scripts" / "gen_command_reference.py"
    )
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_the_command_reference_is_the_current_help():
    gen = _generator()
    stale = gen.OUT.read_text(encoding="utf-8") != gen.reference()
    assert not stale, "docs/commands.md is stale: run .venv/bin/python scripts/gen_command_reference.py"


def test_every_docs_page_the_readme_links_exists():
    import re

    readme = (REPO / "README.md").read_text(encoding="utf-8")
    links = re.findall(r"\]\((docs/[^)#]+)", readme)
    assert links, "the README links no docs page"
    missing = [p for p in links if not (REPO / p).exists()]
    assert missing == []
