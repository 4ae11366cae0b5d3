"""Results that finish out of order, released in input order as soon as each is next in line.

order = InOrder()
i = order.add()          # a place, in input order
order.put(i, result)     # when it is finished (any order)
for result in order.ready():   # every finished result whose predecessors are all out
    ...
"""

from __future__ import annotations

from typing import Generic, Iterator, TypeVar

T = TypeVar("T")


class InOrder(Generic[T]):
    """A reorder buffer: holds only the finished results still waiting for an earlier one."""

    def __init__(self) -> None:
        self._added = 0
        self._next = 0
        self._finished: dict[int, T] = {}

    def add(self) -> int:
        """The next place in input order."""
        self._added += 1
        return self._added - 1

    def put(self, place: int, result: T) -> None:
        if not self._next <= place < self._added or place in self._finished:
            raise ValueError(f"place {place} is not open")
        self._finished[place] = result

    def ready(self) -> Iterator[T]:
        """The finished results now next in line, in input order (each once)."""
        while self._next in self._finished:
            result = self._finished.pop(self._next)
            self._next += 1
            yield result

    @property
    def waiting(self) -> int:
        """How many places are open or held back."""
        return self._added - self._next
