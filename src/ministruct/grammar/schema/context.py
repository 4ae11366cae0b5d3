"""What the object and array builders (objects.py) need from the schema compiler: a
small protocol, so they depend on this interface and not on the compiler class."""

from __future__ import annotations

from typing import Any, Optional, Protocol

from ministruct.errors import SchemaError
from ministruct.grammar.ir import Expr, Mark, RuleRef


class SchemaContext(Protocol):
    """The compiler's services: values, rules, punctuation, errors, policy."""

    source: str
    explicit: bool  # the generation language (extra_properties="explicit")
    marking: bool  # position marks are on (SchemaOptions.marks)
    resolver: Any  # the document's $ref resolver (schema_merge.Resolver)

    @property
    def validator(self) -> Any:
        """A jsonschema validator of the root schema (`evolve(schema=...)` for parts)."""

    def value(self, schema: Any, ptr: str, depth: int) -> Expr:
        """The expression of JSON texts valid against `schema` (at JSON pointer `ptr`)."""

    def error(self, message: str, pointer: str, keyword: Optional[str] = None) -> SchemaError:
        """A SchemaError naming the pointer and keyword (to raise)."""

    def unsupported(self, keyword: str, ptr: str, why: str = "is not enforced") -> None:
        """Refuse a keyword that cannot be enforced (or warn, when lenient)."""

    def restricted(self, keyword: str, ptr: str, why: str) -> None:
        """Warn that a keyword is enforced on a smaller language (every output still valid)."""

    def fresh(self, hint: str) -> str:
        """A new rule name."""

    def define(self, name: str, body: Expr) -> None:
        """Set a rule's body."""

    def rule(self, hint: str, body: Expr) -> RuleRef:
        """A new rule with this body."""

    def marked(self, hint: str, body: Expr, mark: Mark) -> Expr:
        """`body` as a rule carrying a position mark (with marks off: `body` itself)."""

    def mark(self, name: str, mark: Mark) -> None:
        """Give the rule `name` a position mark (nothing with marks off)."""

    def colon(self) -> Expr: ...
    def comma(self, depth: int) -> Expr: ...
    def open_(self, depth: int) -> Expr: ...
    def close(self, depth: int) -> Expr: ...
    def empty_inside(self) -> Expr: ...
