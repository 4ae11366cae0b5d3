"""An independent reader of grammar positions in JSON text, for the position tests:
recursive descent over the whole text, no grammar, no ministruct code."""

from __future__ import annotations

import json

WS = " \t\n\r"


class Replay:
    """Per byte (pointer, part) of a JSON text, by recursive descent (no grammar)."""

    def __init__(self, text: str, tuples: set[str]) -> None:
        self.data = text.encode("utf-8")
        self.i = 0
        self.tags: list[tuple[str, str]] = []
        self.tuples = tuples  # pointers of prefixItems arrays (items keep their index)

    def tag(self, n: int, ptr: str, part: str) -> None:
        self.tags += [(ptr, part)] * n
        self.i += n

    def ws(self, ptr: str) -> None:
        while self.i < len(self.data) and chr(self.data[self.i]) in WS:
            self.tag(1, ptr, "whitespace")

    def string_len(self) -> int:
        j = self.i + 1
        while self.data[j] != ord('"'):
            j += 2 if self.data[j] == ord("\\") else 1
        return j + 1 - self.i

    def value(self, ptr: str) -> None:
        c = chr(self.data[self.i])
        if c == "{":
            self.tag(1, ptr, "structure")
            self.ws(ptr)
            while chr(self.data[self.i]) != "}":
                if chr(self.data[self.i]) == ",":
                    self.tag(1, ptr, "structure")
                    self.ws(ptr)
                n = self.string_len()
                key = json.loads(self.data[self.i : self.i + n])
                child = ptr + "/" + key.replace("~", "~0").replace("/", "~1")
                self.tag(n, child, "key")
                self.ws(child)
                self.tag(1, child, "structure")  # the colon
                self.ws(child)
                self.value(child)
                self.ws(ptr)
            self.tag(1, ptr, "structure")
        elif c == "[":
            self.tag(1, ptr, "structure")
            self.ws(ptr)
            k = 0
            while chr(self.data[self.i]) != "]":
                if chr(self.data[self.i]) == ",":
                    self.tag(1, ptr, "structure")
                    self.ws(ptr)
                self.value(f"{ptr}/{k if ptr in self.tuples else '*'}")
                self.ws(ptr)
                k += 1
            self.tag(1, ptr, "structure")
        elif c == '"':
            self.tag(self.string_len(), ptr, "value")
        else:
            j = self.i
            while j < len(self.data) and chr(self.data[j]) not in ",]} \t\n\r":
                j += 1
            self.tag(j - self.i, ptr, "value")

    def run(self) -> list[tuple[str, str]]:
        self.value("")
        assert self.i == len(self.data)
        return self.tags
