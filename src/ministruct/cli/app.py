"""The `ministruct` command: Typer app, command registration, and the one place errors become messages."""

from __future__ import annotations

import io
import os
import sys
from typing import IO, Any

from ministruct.cli.base import app
from ministruct.cli.errors import error_text, exit_code
from ministruct.cli.help_text import tidy
from ministruct.errors import MinistructError, OutputClosed, OutputError
from ministruct.jobs.records import output_error

try:  # typer >= 0.27 carries its own copy of click, and raises only its exceptions
    from typer._click import exceptions as _tcx

    _CLICK: tuple = (_tcx,)
except ImportError:  # pragma: no cover - older typer uses click itself
    import click

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


class CheckedStdout(io.TextIOBase):
    """sys.stdout whose failed writes are OutputError (a full disk) or OutputClosed (a
    closed pipe) naming `<stdout>`, whoever writes (records, Rich tables, --help, --version)."""

    def __init__(self, stream: IO[str]) -> None:
        self.stream = stream

    def write(self, text: str) -> int:  # type: ignore[override]
        try:
            return self.stream.write(text)
        except OSError as e:
            raise output_error(e, "<stdout>") from None

    def flush(self) -> None:
        try:
            self.stream.flush()
        except OSError as e:
            raise output_error(e, "<stdout>") from None

    def __getattr__(self, name: str) -> Any:  # buffer, mode, name, ...
        return getattr(self.stream, name)

    @property
    def encoding(self) -> str:  # type: ignore[override]
        return self.stream.encoding

    @property
    def errors(self) -> str | None:  # type: ignore[override]
        return self.stream.errors

    def isatty(self) -> bool:
        return self.stream.isatty()

    def fileno(self) -> int:
        return self.stream.fileno()

    def writable(self) -> bool:
        return True


def main() -> None:
    """Run the app, map errors to messages and exit codes (SystemExit: safe to call
    inside a process that goes on, as the tests do)."""
    sys.exit(_status())


def run_command_line() -> None:
    """The console script's and `python -m ministruct`'s entry point: main, then the
    process ends at once (end_process)."""
    end_process(_status())


def _status() -> int:
    _register()
    if sys.stdout is not None and not isinstance(sys.stdout, CheckedStdout):
        sys.stdout = CheckedStdout(sys.stdout)
    return _run(debug=os.environ.get("MINISTRUCT_DEBUG") == "1")


def end_process(status: int) -> None:
    """Exit with `status` without tearing the interpreter down: once the output is
    flushed, nothing is left to do, and freeing the model, every module and every object
    one by one took 60-140 ms of a `gen` (every file the commands write is closed by then;
    idle worker threads need no join). Where a flush fails, under a profiler or a tracer
    (cProfile, coverage: they write at exit) or with MINISTRUCT_DEBUG=1, the ordinary exit."""
    if sys.getprofile() is not None or sys.gettrace() is not None or os.environ.get("MINISTRUCT_DEBUG") == "1":
        sys.exit(status)
    try:
        for stream in (sys.stdout, sys.stderr):
            if stream is not None:
                stream.flush()
    except (OSError, ValueError, MinistructError):
        sys.exit(status)
    os._exit(status)


def _run(*, debug: bool) -> int:
    """The app's exit status, every error said in one line on stderr."""
    try:
        try:
            import typer.main

            rv = tidy(typer.main.get_command(app)).main(prog_name="ministruct", standalone_mode=False)
        except _NoArgsIsHelp as e:
            print(e.ctx.get_help() if e.ctx else e.format_message())
            rv = 0
        sys.stdout.flush()  # what is still buffered fails here, not silently at exit
        return rv if isinstance(rv, int) else 0
    except _UsageErr as e:
        hint = f" (see '{e.ctx.command_path} --help')" if e.ctx else ""
        print(f"ministruct: error: {e.format_message()}{hint}", file=sys.stderr)
        return 2
    except _ClickErr as e:
        print(f"ministruct: error: {e.format_message()}", file=sys.stderr)
        return e.exit_code
    except (*_Abort, KeyboardInterrupt):
        print("ministruct: interrupted", file=sys.stderr)
        return 130
    except (OutputClosed, BrokenPipeError):  # the reader left (| head): a quiet end, as other Unix tools
        silence_stdout()
        return 0
    except MinistructError as e:
        if debug:
            raise
        if isinstance(e, OutputError):
            silence_stdout()  # what stdout still buffers could not be written either
        print(error_text(e), file=sys.stderr)
        return exit_code(e)
    except Exception as e:  # a bug: say so in one line unless debugging
        if debug:
            raise
        print(
            f"ministruct: internal error: {type(e).__name__}: {e} (set MINISTRUCT_DEBUG=1 for the traceback)",
            file=sys.stderr,
        )
        return 3
