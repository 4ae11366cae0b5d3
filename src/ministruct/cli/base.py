"""The Typer app every command registers on, and the one warning format."""

from __future__ import annotations

import sys

import typer

app = typer.Typer(
    name="ministruct",
    help="Grammar-constrained generation with local GGUF models, and the numbers behind every step.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
    context_settings={"help_option_names": ["-h", "--help"]},
)


def _print_version(value: bool) -> None:
    if value:
        from ministruct import __version__

        typer.echo(f"ministruct {__version__}")
        raise typer.Exit(0)


@app.callback()
def _root(
    version: bool = typer.Option(
        False, "--version", help="Print the version and exit.", is_eager=True, callback=_print_version
    ),
) -> None:
    """Grammar-constrained generation with local GGUF models, and the numbers behind every step."""


def warn(message: str) -> None:
    """One warning line on stderr."""
    print(f"ministruct: warning: {message}", file=sys.stderr)
