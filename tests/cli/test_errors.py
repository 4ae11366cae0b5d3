"""The one table from library errors to command-line messages and exit codes."""

from __future__ import annotations

import pytest

from ministruct.cli.errors import error_text
from ministruct.errors import UsageError


@pytest.mark.parametrize(
    "message, parameter, text",
    [
        ("`root` only applies to `grammar`", "root", "--root only applies to --grammar"),
        ("`tool_choice` only applies to `tools`", "tool_choice", "--tool-choice only applies to --tools"),
        ("top_p must be in (0, 1], got 0", "top_p", "--top-p must be in (0, 1], got 0"),
        (
            "the closing text of the thinking is empty",
            "think_close",
            "the closing text of the thinking is empty (--think-close)",
        ),
    ],
)
def test_a_usage_error_names_its_flag_once(message, parameter, text):
    # `root` only applies... read "--root only applies to --grammar (--root)"
    assert error_text(UsageError(message, parameter=parameter)) == f"ministruct: error: {text}"
