"""SchemaOptions: how a JSON Schema becomes a grammar, the one table of its options.

    whitespace        spaced (default) | compact | flexible | pretty: the layout generated
                      between the tokens of JSON: spaced `{"a": 1, "b": [1, 2]}` (one space
                      after `:` and `,`, as `json.dumps` and the models' training data write
                      it), compact `{"a":1}`, flexible (0 to 20 of space/tab/CR/LF around
                      every `:` and `,` and inside brackets: the model chooses), pretty
                      (`json.dumps(value, indent=2)`). docs/constraints.md has the
                      measurements that chose the default
    lenient           False: a keyword the compiler cannot enforce refuses the schema;
                      True: it is dropped, with a warning
    oneof_as_anyof    False: `oneOf` is exactly one (a branch that may overlap others is
                      that branch and not the others, schema/logic.py); True: it is read
                      as `anyOf`
    extra_properties  explicit (default): objects carry only the properties the schema
                      names, plus those `additionalProperties`, `patternProperties` or
                      `unevaluatedProperties` allow where stated, and an array with
                      `prefixItems` and no `items` has no further items; spec: JSON
                      Schema's own meaning. Either way every output is a valid instance.
    marks             False; True: position marks (Grammar.marks) on every key, value,
                      array item and container, for per-step position tags (the collapse
                      study); the language is the same, the grammar has more rules
    documents         (): the schema documents remote `$ref`s may reach, never fetched
                      from the network: a map (or pairs) from a URI, or a URI prefix
                      ending in `/`, to a schema, a JSON file or a directory
                      (schema/documents.py); kept as sorted (URI, "path"/"json", value)

Checked once, when built: a bad value is a UsageError naming the option.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from typing import Any

from ministruct.errors import UsageError

WHITESPACE = ("compact", "spaced", "flexible", "pretty")
DEFAULT_WHITESPACE = "spaced"
EXTRA_PROPERTIES = ("explicit", "spec")


@dataclass(frozen=True)
class SchemaOptions:
    """The options of the JSON Schema front end (see the module's table)."""

    whitespace: str = DEFAULT_WHITESPACE
    lenient: bool = False
    oneof_as_anyof: bool = False
    extra_properties: str = "explicit"
    marks: bool = False
    documents: Any = ()

    def __post_init__(self) -> None:
        from ministruct.grammar.schema.documents import normalize_documents

        object.__setattr__(self, "documents", normalize_documents(self.documents))
        if self.whitespace not in WHITESPACE:
            raise UsageError(
                f"whitespace must be spaced, compact, flexible or pretty, not {self.whitespace!r}",
                parameter="whitespace",
            )
        if self.extra_properties not in EXTRA_PROPERTIES:
            raise UsageError(
                f"extra_properties must be explicit or spec, not {self.extra_properties!r}",
                parameter="extra_properties",
            )

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)
