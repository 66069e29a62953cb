"""The package's imports run one way (DESIGN.md, "Layers, lowest first").

Every module of ``tileplan/`` is read with ``ast`` (nothing is imported). An import is any
``import X`` / ``from X import Y`` statement anywhere in the module, at module level or inside a
function, class or ``if TYPE_CHECKING:`` block; ``from P import name`` counts as an import of the
module ``P.name`` when that is a module of the package, else of ``P``. Importing a module also runs
its parent packages' ``__init__``, but that is not counted as an edge (the package's own imports are
checked where they are written).

(a) No cycle between modules, counting every import: module-level ones (they run when the module is
    loaded) and those inside functions or ``if TYPE_CHECKING:`` too (they cannot knot the loading
    order, but a cycle through them still means neither module can be understood, changed or
    loaded without the other).
(b) No module imports (anywhere in it) a module of a higher layer than its own.

There is no allow-list: a violation is fixed by moving code, not by listing it here.
"""

from __future__ import annotations

import ast
from functools import cache
from pathlib import Path

PACKAGE = Path(__file__).resolve().parents[1] / "tileplan"

#: DESIGN.md's layers, lowest first; a name is a top-level module or package of ``tileplan``.
#: ``warmup`` compiles every loop of the model and the search, so it sits at the top of the library.
LAYERS: tuple[tuple[str, ...], ...] = (
    ("__init__", "arrays", "dims", "errors"),
    ("workload", "arch", "mapping", "files", "presets"),
    ("cost", "interop"),
    ("search", "parallel"),
    ("fusion", "program", "plan"),
    ("api", "compare"),
    ("report", "experiments", "sweep", "bench", "bench_memory", "warmup", "listing"),
    ("cli",),
    ("entry",),
)
LAYER_OF = {name: i for i, names in enumerate(LAYERS) for name in names}


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(PACKAGE.parent).with_suffix("").parts)
    if parts[-1] == "__init__" and len(parts) > 1:
        parts.pop()
    return ".".join(parts)


MODULES: dict[str, Path] = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _layer(module: str) -> int:
    """The layer of a ``tileplan`` module (by its top-level name under the package)."""
    parts = module.split(".")
    top = parts[1] if len(parts) > 1 else "__init__"
    assert top in LAYER_OF, f"tileplan/{top}: not in test_layering.LAYERS; give it a layer (DESIGN.md)"
    return LAYER_OF[top]


def _resolve(module: str, is_package: bool, node: ast.ImportFrom) -> str:
    if not node.level:
        return node.module or ""
    base = module.split(".")
    base = base if is_package else base[:-1]
    base = base[: len(base) - (node.level - 1)]
    return ".".join(base + ([node.module] if node.module else []))


@cache  # both checks walk every module: parse each once
def imports(module: str) -> tuple[tuple[int, str], ...]:
    """``(line, imported tileplan module)`` of every import of the package in ``module``, anywhere in it."""
    path = MODULES[module]
    found: set[tuple[int, str]] = set()
    for node in ast.walk(ast.parse(path.read_text(), filename=str(path))):
        if isinstance(node, ast.Import):
            found.update((node.lineno, a.name) for a in node.names)
        elif isinstance(node, ast.ImportFrom):
            target = _resolve(module, path.name == "__init__.py", node)
            for a in node.names:
                sub = f"{target}.{a.name}"
                found.add((node.lineno, sub if sub in MODULES else target))
    return tuple(sorted((line, m) for line, m in found if m in MODULES))


def _where(module: str, line: int) -> str:
    return f"{MODULES[module].relative_to(PACKAGE.parent)}:{line}"


def test_every_module_has_a_layer() -> None:
    assert len(MODULES) > 100  # the package was found
    for module in MODULES:
        _layer(module)


def test_no_import_runs_up_the_layers() -> None:
    upward = [f"{_where(m, line)} imports {target} (layer {_layer(target)} {LAYERS[_layer(target)]}) from layer "
              f"{_layer(m)} {LAYERS[_layer(m)]}"
              for m in MODULES for line, target in imports(m) if _layer(target) > _layer(m)]
    assert not upward, "imports against DESIGN.md's layers:\n" + "\n".join(upward)


def test_no_import_cycle() -> None:
    edges = {m: {t: line for line, t in reversed(imports(m)) if t != m} for m in MODULES}
    cycles: list[str] = []
    state: dict[str, int] = {}  # 1: on the current path, 2: done
    path: list[str] = []

    def walk(m: str) -> None:
        state[m] = 1
        path.append(m)
        for t in sorted(edges[m]):
            if state.get(t) == 1:
                loop = path[path.index(t):] + [t]
                cycles.append(" -> ".join(f"{a} ({_where(a, edges[a][b])} imports {b})"
                                          for a, b in zip(loop, loop[1:], strict=False)))
            elif t not in state:
                walk(t)
        path.pop()
        state[m] = 2

    for m in sorted(MODULES):
        if m not in state:
            walk(m)
    assert not cycles, "import cycles:\n" + "\n".join(cycles)
