"""JSON Schema -> grammar IR: `schema_to_grammar` (its options: `SchemaOptions`), and
`canonical_order` for instances.

ministruct imports jsonschema only inside this package's functions (and check/, which
imports this package first): the IRI format parsers jsonschema would build at its import
are deferred here until an IRI is checked (validator_import)."""

from ministruct.grammar.schema.compiler import canonical_order, schema_to_grammar
from ministruct.grammar.schema.options import SchemaOptions
from ministruct.grammar.schema.validator_import import defer_format_parsers

defer_format_parsers()

__all__ = ["SchemaOptions", "schema_to_grammar", "canonical_order"]
