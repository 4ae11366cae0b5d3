"""`python -m ministruct` runs the command line."""

from ministruct.cli.app import run_command_line

run_command_line()
