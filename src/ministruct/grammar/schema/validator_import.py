"""`jsonschema`, imported without paying for format checkers no instance has needed yet.

Importing jsonschema imports `rfc3987_syntax` for its `iri` and `iri-reference` checkers,
and that package builds its Lark parsers at import: over a second of every schema
command, most of which never check an IRI. Until one is checked, a stand-in module takes
its place; the first call imports the real package and hands the call to it, so every
verdict is still jsonschema's own (with rfc3987_syntax's parsers).
"""

from __future__ import annotations

import importlib
import importlib.util
import sys
import threading
import types
from typing import Any

DEFERRED = "rfc3987_syntax"
_lock = threading.Lock()


class _Deferred(types.ModuleType):
    """Stands for DEFERRED in sys.modules until an attribute it lacks is asked for."""

    def __getattr__(self, name: str) -> Any:
        if name.startswith("__") and name.endswith("__"):
            raise AttributeError(name)
        return getattr(_real(), name)


def _real() -> types.ModuleType:
    with _lock:
        module = sys.modules.get(DEFERRED)
        if isinstance(module, _Deferred):
            del sys.modules[DEFERRED]
            try:
                module = importlib.import_module(DEFERRED)
            except BaseException:
                sys.modules[DEFERRED] = _stand_in()
                raise
        return module if module is not None else importlib.import_module(DEFERRED)


def _is_valid_syntax(term: str, value: str) -> bool:
    return _real().is_valid_syntax(term, value)


def _stand_in() -> _Deferred:
    module = _Deferred(DEFERRED, "ministruct's stand-in until an IRI format is checked")
    module.is_valid_syntax = _is_valid_syntax  # what jsonschema._format imports by name
    return module


def defer_format_parsers() -> None:
    """Put the stand-in in place if jsonschema is not imported yet and the real package is
    installed (without it jsonschema leaves the IRI formats unchecked, and so do we)."""
    if "jsonschema" in sys.modules or DEFERRED in sys.modules:
        return
    with _lock:
        if DEFERRED not in sys.modules and importlib.util.find_spec(DEFERRED) is not None:
            sys.modules[DEFERRED] = _stand_in()
