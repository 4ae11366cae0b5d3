"""JSON Schema -> grammar IR: `schema_to_grammar` (its options: `SchemaOptions`), and
`canonical_order` for instances."""

from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar
from ministruct.grammar.schema.options import SchemaOptions

__all__ = ["SchemaOptions", "schema_to_grammar", "canonical_order"]
