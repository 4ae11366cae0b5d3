"""Grammars: constraint text in, one grammar IR out.

In: a regex, GBNF or Lark text, a JSON Schema, a tool list, a list of choices. Out: a
`Grammar` (the IR) and a `Constraint` (the grammar plus what it came from). Never imports
a tokenizer, numpy, or any package below this one in the layer list (engine, decode, ...).

Files, in the order data flows through them:
    gbnf/ lark/ regex/ schema/  front ends: text -> Grammar (Lark parses the text)
    ir.py                  the IR itself; a leaf: it imports no front end
    analysis.py            static checks (undefined rules, left recursion, unreachable)
    left_recursion.py      left recursion rewritten away, the language kept (Lark's front end)
    limits.py              bounded work: sizes refused before anything is built
    constraint.py          Constraint.from_regex / from_gbnf / from_json_schema / from_choices,
                           and load_constraint for the command line's flags
    bundled/               the bundled .gbnf grammars (`--grammar json`, ...)
"""
