"""The dependency direction of ARCHITECTURE.md, checked on every import of the package.

serve -> actors -> pipelines -> store, models; ``export`` is used by actors and
the command line; ``types``, ``config`` and ``errors`` by all. Imports inside
functions count too: a lazy import is still a dependency.
"""

import ast
from pathlib import Path

import raymem

PACKAGE = Path(raymem.__file__).parent

#: What each layer may import from raymem (besides itself and the shared modules).
ALLOWED: dict[str, set[str]] = {
    "store": set(),
    "models": set(),
    "pipelines": {"store", "models"},
    "export": {"store"},
    "actors": {"pipelines", "store", "models", "export"},
    "serve": {"actors"},
}
SHARED = {"types", "config", "errors", "names"}
#: Wire types of one area (``raymem/types_<area>.py``) are shared like ``types``.
SHARED_PREFIX = "types_"
#: Layers that must not import Ray at all (they are tested without a cluster).
NO_RAY = {"store", "pipelines", "models", "export"}


def _imports(path: Path) -> list[tuple[int, str]]:
    """Every module ``path`` imports, at any depth of the file, absolute names."""
    tree = ast.parse(path.read_text(), filename=str(path))
    found = []
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            found += [(node.lineno, alias.name) for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            found.append((node.lineno, node.module))
    return found


def _layer_of(module: str) -> str | None:
    parts = module.split(".")
    if parts[0] != "raymem" or len(parts) < 2:
        return None
    return parts[1]


def test_every_import_follows_the_dependency_direction() -> None:
    breaks = []
    for path in sorted(PACKAGE.rglob("*.py")):
        relative = path.relative_to(PACKAGE).parts
        layer = relative[0] if len(relative) > 1 else None
        if layer not in ALLOWED:
            continue
        for line, module in _imports(path):
            target = _layer_of(module)
            if layer in NO_RAY and (module == "ray" or module.startswith("ray.")):
                breaks.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
            if target is None or target == layer or target in SHARED:
                continue
            if target.startswith(SHARED_PREFIX):
                continue
            if target not in ALLOWED[layer]:
                breaks.append(f"{path.relative_to(PACKAGE)}:{line} imports {module}")
    assert not breaks, "imports against the dependency direction:\n" + "\n".join(breaks)


def test_the_checker_sees_function_level_imports(tmp_path: Path) -> None:
    sample = tmp_path / "sample.py"
    sample.write_text("def f():\n    from raymem.serve import app\n    import ray\n")
    assert _imports(sample) == [(2, "raymem.serve"), (3, "ray")]
