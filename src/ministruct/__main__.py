"""`python -m ministruct` runs the command line."""

from .cli.app import main

main()
