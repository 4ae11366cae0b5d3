"""`python -m ministruct` runs the command line."""

from ministruct.cli.app import main

main()
