"""Does a text satisfy a constraint, and where not.

In: a Grammar or a JSON Schema and a text. Out: a verdict with the place (line, column,
byte offset, or JSON pointer and keyword) and what was expected. Never imports a model.

Files:
    result.py     CheckResult, the one verdict type
    grammar.py    the grammar's own check (could the engine have produced this text?)
    instance.py   JSON Schema's question (is this a valid instance, in any layout?)
"""
