"""Regular expressions (Python's `re` syntax) <-> grammar IR: `parse_regex`, `grammar_to_regex`."""

from ministruct.grammar.regex.parse import parse_regex
from ministruct.grammar.regex.printer import grammar_to_regex

__all__ = ["parse_regex", "grammar_to_regex"]
