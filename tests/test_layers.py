"""The packages form layers: each imports only the layers below it, never one above.

Parsed from the source (every `import`, lazy ones inside functions included), so a
cycle cannot hide behind an import that only runs in one command.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from common.config import REPO_ROOT

# Top to bottom; see the README's "Architecture". `schemas` is data: it imports nothing.
LAYERS = ["cli", "kubeflow", "pipeline", "components", "common", "schemas"]
# Outside the product, free to use any layer (nothing in the product imports them).
USERS = ["tests", "benchmarks", "clients"]


def imported_packages(package: str, root: pathlib.Path = REPO_ROOT) -> dict[str, set[str]]:
    """Our top-level packages that each module of `package` imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / package).rglob("*.py")):
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                names.add(node.module)
        ours = {name.split(".")[0] for name in names} & set(LAYERS + USERS) - {package}
        if ours:
            found[str(path.relative_to(root))] = ours
    return found


@pytest.mark.parametrize("package", LAYERS)
def test_each_layer_imports_only_the_layers_below_it(package):
    allowed = set(LAYERS[LAYERS.index(package) + 1 :])

    upward = {
        module: sorted(imports - allowed)
        for module, imports in imported_packages(package).items()
        if imports - allowed
    }

    assert not upward, f"{package}/ may import only {sorted(allowed)}; found {upward}"


def test_the_layer_check_sees_lazy_imports(tmp_path):
    (tmp_path / "components").mkdir()
    (tmp_path / "components" / "lazy.py").write_text(
        "import common.config\n\ndef f():\n    from pipeline.pipeline import create_pipeline\n"
    )

    assert imported_packages("components", tmp_path) == {
        "components/lazy.py": {"common", "pipeline"}
    }
