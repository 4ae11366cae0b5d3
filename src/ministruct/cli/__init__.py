"""The `ministruct` command: flags in, library calls, output; nothing else.

app.py registers the commands; errors.py is the one table from library errors to
messages, flags and exit codes; options.py holds the flags the commands share. One
module per command: gen.py (gen_fleet.py for --server), inspect.py, check.py,
convert.py, collapse.py, bench.py; progress.py for stderr progress.
"""
