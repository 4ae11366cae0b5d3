"""The `ministruct` command: Typer app, command registration, and the one place errors become messages."""

from __future__ import annotations

import os
import sys

import typer

from ..errors import GrammarSyntaxError, MinistructError

app = typer.Typer(
    name="ministruct",
    help="Grammar-constrained generation with local GGUF models, and the numbers behind every step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _register() -> None:
    from . import check, convert, gen  # noqa: F401  (each module adds its command to `app`)

    for optional in ("inspect", "bench", "collapse"):
        try:
            __import__(f"{__package__}.{optional}")
        except ModuleNotFoundError as e:
            if e.name != f"{__package__}.{optional}":
                raise


def error_text(e: MinistructError) -> str:
    """The stderr text for an error: one line, plus the line and caret for syntax errors."""
    text = f"ministruct: error: {e}"
    if isinstance(e, GrammarSyntaxError):
        excerpt = e.excerpt()
        if excerpt:
            text += "\n" + excerpt
    return text


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"ministruct: warning: {message}", file=sys.stderr)


def main() -> None:
    """Console entry point: run the app, map errors to messages and exit codes."""
    _register()
    debug = os.environ.get("MINISTRUCT_DEBUG") == "1"
    try:
        app()
    except MinistructError as e:
        if debug:
            raise
        print(error_text(e), file=sys.stderr)
        sys.exit(e.exit_code)
    except KeyboardInterrupt:
        print("ministruct: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # downstream closed the pipe (| head): quiet exit, as other Unix tools
        try:
            sys.stdout = open(os.devnull, "w")
        finally:
            sys.exit(0)
    except Exception as e:  # a bug: say so in one line unless debugging
        if debug:
            raise
        print(f"ministruct: internal error: {type(e).__name__}: {e} (set MINISTRUCT_DEBUG=1 for the traceback)", file=sys.stderr)
        sys.exit(3)


if __name__ == "__main__":
    main()
