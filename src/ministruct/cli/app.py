"""The `ministruct` command: Typer app, command registration, and the one place errors become messages."""

from __future__ import annotations

import os
import sys

import click

from ministruct.cli.base import app
from ministruct.cli.errors import error_text, exit_code
from ministruct.errors import MinistructError, OutputClosed, OutputError

try:  # typer >= 0.29 carries its own copy of click
    from typer._click import exceptions as _tcx

    _CLICK = (click.exceptions, _tcx)
except ImportError:  # pragma: no cover - older typer uses click itself
    _CLICK = (click.exceptions,)

_NoArgsIsHelp = tuple(m.NoArgsIsHelpError for m in _CLICK)
_UsageErr = tuple(m.UsageError for m in _CLICK)
_ClickErr = tuple(m.ClickException for m in _CLICK)
_Abort = tuple(getattr(m, "Abort") for m in _CLICK if hasattr(m, "Abort"))


COMMANDS = ("check", "collapse", "convert", "gen")  # each module adds its command to `app`
OPTIONAL_COMMANDS = ("inspect", "bench")


def _register(argv: list[str] | None = None) -> None:
    """Import the command modules: only the one the command line names, when it names
    one (a `check` need not import what `gen` or `collapse` run on); else all, for the
    command list and the error that names an unknown command."""
    args = sys.argv[1:] if argv is None else argv
    named = args[0] if args and args[0] in COMMANDS + OPTIONAL_COMMANDS else None
    if named is not None and _load(named):
        return
    for name in COMMANDS:
        _load(name)
    for name in OPTIONAL_COMMANDS:
        _load(name)


def _load(name: str) -> bool:
    """Import one command module; False when an optional one is not installed."""
    module = f"{__package__}.{name}"
    try:
        __import__(module)
    except ModuleNotFoundError as e:
        if e.name != module or name not in OPTIONAL_COMMANDS:
            raise
        return False
    return True


def silence_stdout() -> None:
    """Point stdout at /dev/null, so the flush at exit cannot fail again (no "Exception
    ignored" noise after a closed pipe or a full disk)."""
    try:
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.stdout.fileno())
        os.close(devnull)
    except (OSError, ValueError, AttributeError):  # no real stdout (tests' runners)
        pass


def main() -> None:
    """Console entry point: run the app, map errors to messages and exit codes."""
    _register()
    debug = os.environ.get("MINISTRUCT_DEBUG") == "1"
    try:
        rv = app(standalone_mode=False, prog_name="ministruct")
        sys.exit(rv if isinstance(rv, int) else 0)
    except _NoArgsIsHelp as e:
        print(e.ctx.get_help() if e.ctx else e.format_message())
        sys.exit(0)
    except _UsageErr as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
        print(f"ministruct: error: {e.format_message()}{hint}", file=sys.stderr)
        sys.exit(2)
    except _ClickErr as e:
        print(f"ministruct: error: {e.format_message()}", file=sys.stderr)
        sys.exit(e.exit_code)
    except _Abort:
        print("ministruct: interrupted", file=sys.stderr)
        sys.exit(130)
    except OutputClosed:
        silence_stdout()
        sys.exit(0)
    except MinistructError as e:
        if debug:
            raise
        if isinstance(e, OutputError):
            silence_stdout()  # what stdout still buffers could not be written either
        print(error_text(e), file=sys.stderr)
        sys.exit(exit_code(e))
    except KeyboardInterrupt:
        print("ministruct: interrupted", file=sys.stderr)
        sys.exit(130)
    except BrokenPipeError:
        # downstream closed the pipe (| head): quiet exit, as other Unix tools
        silence_stdout()
        sys.exit(0)
    except Exception as e:  # a bug: say so in one line unless debugging
        if debug:
            raise
        print(
            f"ministruct: internal error: {type(e).__name__}: {e} (set MINISTRUCT_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        sys.exit(3)
