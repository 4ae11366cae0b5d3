"""The `ministruct` command: flags in, library calls, output; nothing else.

app.py registers the commands; errors.py is the one table from library errors to
messages, flags and exit codes. The flags the commands share come in groups, each a
dataclass a decorator gives a command: options.py (the model and sampling flags, the
single shared flags, and `with_flags`, the decorators' mechanism), constraint_options.py
(the constraint flags), think_options.py (think first), gen_options.py (gen's own and the
server fleet). One module per command: gen.py (gen_fleet.py for --server), inspect.py,
check.py, convert.py, collapse.py, bench.py; progress.py for stderr progress.
"""
