"""The front page cannot drift (issue 52): every README example that shows its output is
run on the bundled model and compared with README.md; scripts/regen_readme.py writes
them (and the prose that reads their numbers) from what the commands print."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


def _script():
    spec = importlib.util.spec_from_file_location("regen_readme", REPO / "scripts" / "regen_readme.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_shown_output_is_a_generated_block():
    """A `$ ministruct ...` line followed by its output, outside the script's blocks, would
    be an example nothing checks."""
    regen = _script()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    outside = regen.BLOCK.sub("", text)
    lines = outside.splitlines()
    for i, line in enumerate(lines[:-1]):
        if line.startswith("    $ "):
            after = lines[i + 1]
            assert not after.startswith("    ") or after.startswith("    $ "), f"unchecked output after {line!r}"
    assert set(regen.blocks(text)) == {
        "capital",
        "conj",
        "conj-prose",
        "more",
        "think-tools",
        "tools-prose",
        "particles",
        "particles-prose",
    }
    assert not re.search(r"^    \{", outside, re.M)  # (no shown record outside them)


@pytest.mark.model
def test_the_readme_shows_what_the_commands_print():
    regen = _script()
    text = (REPO / "README.md").read_text(encoding="utf-8")
    now = regen.generate()
    shown = regen.blocks(text)
    for name, block in now.items():
        assert shown[name] == block, f"README.md's {name!r} differs; run python scripts/regen_readme.py\n{block}"
