"""GBNF (llama.cpp's dialect) -> grammar IR: `parse_gbnf`."""

from ministruct.grammar.gbnf.parse import parse_gbnf

__all__ = ["parse_gbnf"]
