"""JSON Schema -> grammar IR: `schema_to_grammar`, and `canonical_order` for instances."""

from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar

__all__ = ["schema_to_grammar", "canonical_order"]
