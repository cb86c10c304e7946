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
# `tpu_pipeline` holds our artifact types, at the top level because TFX's Vertex AI step
# container imports a custom type's name (`tpu_pipeline.ModelExplanation`) as a class path.
LAYERS = [
    "cli",
    "kubeflow",
    "pipeline",
    "serving_ops",
    "components",
    "tpu_pipeline",
    "common",
    "schemas",
]
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
        "import common.config\n\ndef f():\n    from pipeline.wiring.graph import create_pipeline\n"
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
    "span_shift_gate",
    "packager",
    "explainer",
    "evaluator",
    "pusher",
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
        names: set[str] = set()
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names |= {alias.name for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                if node.module == "components":  # from components import trainer
                    names |= {f"components.{alias.name}" for alias in node.names}
                else:
                    names.add(node.module)
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
        "from components.serving import export\n\ndef f():\n    import components.contract\n"
    )

    assert imported_rooms(tmp_path) == {"components/training/loop.py": {"serving", "contract"}}
