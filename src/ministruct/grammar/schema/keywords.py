"""Keyword sets of the JSON Schema front end, each defined once."""

# keywords that never constrain an instance: metadata, annotations, definitions kept for
# `$ref`, and the OpenAPI/Swagger spellings real schemas carry (`nullable`, `discriminator`,
# `example`, draft-04's `id`)
ANNOTATIONS = frozenset(
    {
        "title",
        "description",
        "default",
        "examples",
        "example",
        "$comment",
        "$schema",
        "$id",
        "id",
        "$anchor",
        "$dynamicAnchor",
        "$vocabulary",
        "$defs",
        "definitions",
        "deprecated",
        "readOnly",
        "writeOnly",
        "contentMediaType",
        "contentEncoding",
        "contentSchema",
        "discriminator",
        "nullable",
    }
)
