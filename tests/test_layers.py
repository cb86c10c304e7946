"""The packages form layers: each imports only the layers below it, never one above.

Parsed from the source (every `import`, lazy ones inside functions included), so a
cycle cannot hide behind an import that only runs in one command.
"""

from __future__ import annotations

import ast
import pathlib

import pytest

from tpu_pipeline.common.config import REPO_ROOT

# Top to bottom; see the README's "Architecture". `schemas` is data: it imports nothing.
# `serving_ops` is the serving control plane: every operation on serving state, local and
# Vertex AI, below the wiring that runs the Pusher and above the components it publishes.
LAYERS = ["cli", "kubeflow", "pipeline", "serving_ops", "components", "common", "schemas"]
# Outside the product, free to use any layer (nothing in the product imports them).
USERS = ["tests", "benchmarks", "clients"]


PACKAGE = "tpu_pipeline"  # the one import name the distribution installs


def _imported_modules(path: pathlib.Path) -> tuple[set[str], set[str]]:
    """The project modules a file imports (without `tpu_pipeline.`), and its bare imports.

    `from tpu_pipeline import common` names `common`; `from tpu_pipeline.common.config
    import X` names `common.config`. A bare `import common` (the names the product had
    before it owned one import name) is returned apart: it would load a second copy of
    the module in a checkout, and does not exist in an installed wheel.
    """
    product: set[str] = set()
    bare: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names = [alias.name for alias in node.names]
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            # `from tpu_pipeline.components import trainer` imports the trainer's room.
            names = [f"{node.module}.{alias.name}" for alias in node.names]
        else:
            continue
        for name in names:
            if name.startswith(PACKAGE + "."):
                product.add(name[len(PACKAGE) + 1 :])
            elif name.split(".")[0] in LAYERS:
                bare.add(name)
            elif name.split(".")[0] in USERS:
                product.add(name)
    return product, bare


def imported_packages(package: str, root: pathlib.Path = REPO_ROOT) -> dict[str, set[str]]:
    """Our top-level packages that each module of `package` imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / package).rglob("*.py")):
        product, bare = _imported_modules(path)
        names = product | bare
        ours = {name.split(".")[0] for name in names} & set(LAYERS + USERS) - {package}
        if ours:
            found[str(path.relative_to(root))] = ours
    return found


def bare_imports(root: pathlib.Path = REPO_ROOT) -> dict[str, set[str]]:
    """Imports of a product package without `tpu_pipeline.`, by module path."""
    found: dict[str, set[str]] = {}
    for top in LAYERS + USERS:
        for path in sorted((root / top).rglob("*.py")):
            _, bare = _imported_modules(path)
            if bare:
                found[str(path.relative_to(root))] = bare
    return found


def test_every_import_of_the_product_names_its_one_package():
    assert not bare_imports(), f"import these as {PACKAGE}.<name>: {bare_imports()}"


def test_the_bare_import_check_sees_each_form(tmp_path):
    (tmp_path / "cli").mkdir()
    (tmp_path / "cli" / "old.py").write_text(
        "import common\nfrom pipeline import wiring\n\ndef f():\n    import components.trainer\n"
    )
    (tmp_path / "cli" / "new.py").write_text(
        "from tpu_pipeline import common\nfrom tpu_pipeline.pipeline import wiring\n"
    )

    assert bare_imports(tmp_path) == {
        "cli/old.py": {"common", "pipeline.wiring", "components.trainer"}
    }


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
        "import tpu_pipeline.common.config\n\ndef f():\n"
        "    from tpu_pipeline.pipeline.wiring.graph import create_pipeline\n"
    )

    assert imported_packages("components", tmp_path) == {
        "components/lazy.py": {"common", "pipeline"}
    }


# Inside components/: the rooms, top to bottom (README "Architecture"). The modules at the
# top are the ones TFX names by dotted path, and the Trainer's training child, which the
# Trainer starts by its module path; a room imports only rooms below its own level, never
# one beside it. Modules inside one room import each other freely.
ENTRY_MODULES = [
    "preprocessing",
    "trainer",
    "trainer_child",
    "tuner",
    "data_gate",
    "packager",
    "explainer",
    "evaluator",
    "pusher",
    "span_shift_gate",
]
COMPONENT_LEVELS = [
    ENTRY_MODULES,
    ["preflight", "explain", "model_card"],
    ["training", "serving"],
    ["device", "models", "example_gen", "data_checks", "drift", "evaluation"],
    ["images", "imagenet_files"],
    ["contract"],
]


def room_of(module_path: str) -> str:
    """The room of `components/<room>/...py` or `components/<module>.py`."""
    parts = pathlib.PurePosixPath(module_path).parts
    return parts[1] if len(parts) > 2 else pathlib.PurePosixPath(parts[1]).stem


def imported_rooms(root: pathlib.Path = REPO_ROOT) -> dict[str, set[str]]:
    """The rooms of components/ that each of its modules imports, by module path."""
    found: dict[str, set[str]] = {}
    for path in sorted((root / "components").rglob("*.py")):
        names, _ = _imported_modules(path)
        rooms = {name.split(".")[1] for name in names if name.startswith("components.")}
        module = path.relative_to(root).as_posix()
        if rooms - {room_of(module)}:
            found[module] = rooms - {room_of(module)}
    return found


def test_every_room_of_components_has_a_level():
    rooms = {
        room_of(p.relative_to(REPO_ROOT).as_posix())
        for p in (REPO_ROOT / "components").rglob("*.py")
    }
    placed = {room for level in COMPONENT_LEVELS for room in level}

    assert rooms - {"__init__"} == placed


def test_each_room_of_components_imports_only_rooms_below_it():
    level_of = {room: index for index, level in enumerate(COMPONENT_LEVELS) for room in level}
    upward = {}
    for module, rooms in imported_rooms().items():
        own = level_of[room_of(module)]
        # Entry modules may use each other (the Tuner trains through the Trainer's fit).
        wrong = {
            room for room in rooms if level_of[room] < own or (level_of[room] == own and own != 0)
        }
        if wrong:
            upward[module] = sorted(wrong)

    assert not upward, f"components/ rooms import upward or sideways: {upward}"


def test_the_room_check_sees_sideways_imports(tmp_path):
    (tmp_path / "components" / "training").mkdir(parents=True)
    (tmp_path / "components" / "training" / "loop.py").write_text(
        "from tpu_pipeline.components.serving import export\n\ndef f():\n"
        "    import tpu_pipeline.components.contract\n"
    )

    assert imported_rooms(tmp_path) == {"components/training/loop.py": {"serving", "contract"}}


def _module_file(name: str, root: pathlib.Path) -> pathlib.Path | None:
    """The file of product module `name` (`tpu_pipeline.` optional), or None."""
    parts = name.removeprefix(f"{PACKAGE}.").split(".")
    if parts[0] not in LAYERS:
        return None
    path = root.joinpath(*parts)
    for candidate in (path.with_suffix(".py"), path / "__init__.py"):
        if candidate.is_file():
            return candidate
    return None


def module_imports(root: pathlib.Path = REPO_ROOT) -> dict[pathlib.Path, set[pathlib.Path]]:
    """Each product module's file, and the product module files it imports (lazily too).

    `from package import module` imports that module, not the package's own code, so it
    counts as an import of the module alone.
    """
    graph: dict[pathlib.Path, set[pathlib.Path]] = {}
    for top in LAYERS:
        for path in sorted((root / top).rglob("*.py")):
            names: list[str] = []
            for node in ast.walk(ast.parse(path.read_text(), str(path))):
                if isinstance(node, ast.Import):
                    names += [alias.name for alias in node.names]
                elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                    inner = [f"{node.module}.{alias.name}" for alias in node.names]
                    whole = all(_module_file(name, root) for name in inner)
                    names += inner if whole else [node.module, *inner]
            files = {_module_file(name, root) for name in names}
            graph[path] = {file for file in files if file is not None and file != path}
    return graph


def import_circles(graph: dict[pathlib.Path, set[pathlib.Path]]) -> list[list[pathlib.Path]]:
    """The groups of modules that import each other, directly or around a circle (Tarjan)."""
    order: dict[pathlib.Path, int] = {}
    low: dict[pathlib.Path, int] = {}
    stack: list[pathlib.Path] = []
    circles = []

    def visit(module: pathlib.Path) -> None:
        order[module] = low[module] = len(order)
        stack.append(module)
        for imported in sorted(graph.get(module, ())):
            if imported not in order:
                visit(imported)
                low[module] = min(low[module], low[imported])
            elif imported in stack:
                low[module] = min(low[module], order[imported])
        if low[module] == order[module]:
            group = []
            while not group or group[-1] != module:
                group.append(stack.pop())
            if len(group) > 1:
                circles.append(sorted(group))

    for module in sorted(graph):
        if module not in order:
            visit(module)
    return circles


def test_no_modules_import_each_other():
    circles = [
        [str(path.relative_to(REPO_ROOT)) for path in circle]
        for circle in import_circles(module_imports())
    ]

    assert not circles, f"modules that import each other (a circle): {circles}"


def test_the_circle_check_sees_a_circle_through_a_lazy_import(tmp_path):
    (tmp_path / "kubeflow").mkdir()
    (tmp_path / "kubeflow" / "runner.py").write_text("from tpu_pipeline.kubeflow.jobs import A\n")
    (tmp_path / "kubeflow" / "jobs.py").write_text(
        "def f():\n    from tpu_pipeline.kubeflow import runner\n"
    )
    (tmp_path / "kubeflow" / "alone.py").write_text("import tpu_pipeline.kubeflow.jobs\n")

    circles = import_circles(module_imports(tmp_path))

    assert circles == [[tmp_path / "kubeflow" / "jobs.py", tmp_path / "kubeflow" / "runner.py"]]
