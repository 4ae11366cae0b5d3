"""The import graph: no cycles between modules, and packages import downward only
(the layer order of ../shared/docs/architecture.md)."""

from __future__ import annotations

import ast
import sys
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src" / "ministruct"

# lower layers first; a module may import its own layer and the layers before it
LAYERS = [
    {"errors"},
    {"grammar"},
    {"engine"},
    {"decode"},
    {"check"},
    {"jobs"},
    {"diagnostics"},
    {"fleet"},
    {"cli"},
    {"__init__", "__main__"},
]
RANK = {name: i for i, names in enumerate(LAYERS) for name in names}


def module_name(path: Path) -> str:
    rel = path.relative_to(SRC.parent).with_suffix("")
    parts = list(rel.parts)
    if parts[-1] == "__init__":
        parts = parts[:-1]
    return ".".join(parts)


def imports(path: Path, top_level_only: bool) -> set[str]:
    """Modules of the package that `path` imports (resolved, relative imports included)."""
    tree = ast.parse(path.read_text())
    me = module_name(path)
    pkg = me if path.name == "__init__.py" else me.rsplit(".", 1)[0]
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    out: set[str] = set()
    for node in nodes:
        if isinstance(node, ast.If):  # `if TYPE_CHECKING:` blocks are not run
            continue
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.startswith("ministruct")}
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = pkg.split(".")[: len(pkg.split(".")) - node.level + 1]
                mod = ".".join(base + ([node.module] if node.module else []))
            else:
                mod = node.module or ""
            if not mod.startswith("ministruct"):
                continue
            for a in node.names:  # `from . import x` may name a submodule
                sub = f"{mod}.{a.name}"
                out.add(
                    sub
                    if (SRC.parent / (sub.replace(".", "/") + ".py")).exists()
                    or (SRC.parent / sub.replace(".", "/")).is_dir()
                    else mod
                )
    out.discard(me)
    return out


def all_modules() -> dict[str, Path]:
    return {module_name(p): p for p in SRC.rglob("*.py")}


def layer_of(module: str) -> int:
    parts = module.split(".")
    return RANK[parts[1] if len(parts) > 1 else "__init__"]


def test_every_package_is_placed_in_a_layer():
    for name in all_modules():
        parts = name.split(".")
        assert len(parts) == 1 or parts[1].removesuffix(".py") in RANK, name


def test_the_root_holds_only_errors_and_the_public_face():
    loose = sorted(p.name for p in SRC.glob("*.py"))
    assert loose == ["__init__.py", "__main__.py", "errors.py"]


def test_a_cycle_through_a_lazy_import_is_seen(tmp_path, monkeypatch):
    """The cycle check sees imports made inside functions (the trap of Grammar.from_gbnf)."""
    pkg = tmp_path / "ministruct"
    (pkg / "grammar").mkdir(parents=True)
    (pkg / "__init__.py").write_text("")
    (pkg / "grammar" / "__init__.py").write_text("")
    (pkg / "grammar" / "ir.py").write_text("def f():\n    from ministruct.grammar.front import g\n")
    (pkg / "grammar" / "front.py").write_text("from ministruct.grammar.ir import f\n")
    monkeypatch.setattr(sys.modules[__name__], "SRC", pkg)
    mods = {module_name(p): p for p in pkg.rglob("*.py")}
    ir = mods["ministruct.grammar.ir"]
    assert "ministruct.grammar.front" in imports(ir, top_level_only=False)
    assert "ministruct.grammar.front" not in imports(ir, top_level_only=True)
    assert find_cycles(mods) == [["ministruct.grammar.front", "ministruct.grammar.ir"]]


def find_cycles(mods: dict[str, Path]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
    # imports inside functions count: a lazy import is still a dependency
    graph = {m: {i for i in imports(p, top_level_only=False) if i in mods} for m, p in mods.items()}
    # a package's __init__ importing its own submodules is how it exports them: not a cycle
    for m in graph:
        graph[m] = {i for i in graph[m] if not m.startswith(i + ".") or i == "ministruct"}
        graph[m].discard("ministruct")
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    cycles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                cycles.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return cycles


def test_no_import_cycles_between_modules():
    assert find_cycles(all_modules()) == []


def test_packages_import_downward_only():
    wrong = []
    for m, p in all_modules().items():
        for i in imports(p, top_level_only=False):
            if i != "ministruct" and layer_of(i) > layer_of(m):
                wrong.append(f"{m} imports {i}")
    assert wrong == []
