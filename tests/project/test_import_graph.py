"""The code's arrows point one way, down the floors, with no import circle anywhere:

    tasks.py -> the ops rooms -> ops.stacks -> the shared top of ops
             -> infra/ -> bootstrap/ -> model/
    (ops.review -> policy/ -> model/price_table.py, standalone)

model/ is the ground floor: plain data (the config model, the node plan, labels, prices, ...)
that imports only the standard library, pydantic, yaml and itself. bootstrap/ (what runs on a
node, rendered from the model) stands on it; infra/ (pulumi resources and cloud APIs) stands
on both. Each floor may import its own and those below it, never one above: bootstrap never
imports infra, model neither. No two floors are counted as one.

The graph is read from the source with `ast`, every import statement counted wherever it
sits (inside a function or under TYPE_CHECKING too: a circle hidden in a function is still a
circle). An ops room is a subpackage of ops/ (`ops.review`, `ops.lifecycle`, ...); the shared
top of ops (`ops.errors`, `ops.paths`, ...) is one room of its own, so a shared module that
imports a room closes a circle. policy/ (the policy pack) is a room of its own that imports
nothing of the project but model's standalone modules (the price table's reader, which
imports nothing of the project): Pulumi's analyzer runs it alone, and ops.review imports it.
"""

from __future__ import annotations

import ast
import sys
from collections.abc import Iterable, Mapping
from pathlib import Path

PROJECT_ROOT = Path(__file__).resolve().parents[2]
PACKAGES = ("model", "bootstrap", "infra", "ops", "policy")
# The floors below ops, ground floor first: a module imports its own floor and those below.
FLOORS = ("model", "bootstrap", "infra")
# What model/ may import besides itself and the standard library.
MODEL_THIRD_PARTY = {"pydantic", "yaml"}
# Ground-floor modules that import nothing of the project, the policy pack's only way in.
STANDALONE = {"model", "model.price_table"}

Graph = Mapping[str, set[str]]


def modules(root: Path, packages: Iterable[str]) -> dict[str, Path]:
    """Dotted module name -> its file, for every .py file under the packages."""
    found = {}
    for package in packages:
        for path in sorted((root / package).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            found[".".join(parts)] = path
    return found


def imported_names(source: str) -> set[str]:
    """Every module an import statement names, at any depth of the file; `from a import b`
    names `a.b` too, which counts when `a.b` is a module."""
    names = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


def import_graph(root: Path, packages: Iterable[str], extra: Iterable[str] = ()) -> Graph:
    """Module -> the modules of the packages (and of `extra`, top-level files such as tasks.py)
    it imports."""
    files = modules(root, packages)
    files.update({name: root / f"{name}.py" for name in extra})
    return {
        name: {target for target in imported_names(path.read_text())
               if target in files and target != name}
        for name, path in files.items()
    }


def cycles(graph: Graph) -> list[list[str]]:
    """The strongly connected parts of more than one node (Tarjan), each sorted."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[list[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for target in sorted(graph.get(node, ())):
            if target not in index:
                visit(target)
                low[node] = min(low[node], low[target])
            elif target in on_stack:
                low[node] = min(low[node], index[target])
        if low[node] == index[node]:
            part = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                part.append(member)
                if member == node:
                    break
            if len(part) > 1:
                found.append(sorted(part))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def room(module: str) -> str:
    """`ops.review.plan` -> `ops.review`; the shared top of ops (`ops.errors`) -> `ops`; a
    module of a floor (`model.plan`, `infra.workers.provider`) -> its floor; `tasks` ->
    `tasks`."""
    parts = module.split(".")
    if parts[0] == "ops" and len(parts) > 2:
        return ".".join(parts[:2])
    return parts[0]


def room_graph(graph: Graph) -> Graph:
    rooms: dict[str, set[str]] = {}
    for module, targets in graph.items():
        rooms.setdefault(room(module), set()).update(
            room(target) for target in targets if room(target) != room(module))
    return rooms


def floor(module: str) -> int | None:
    """The floor a module stands on (0 for model/, the ground), None above the floors."""
    top = module.split(".")[0]
    return FLOORS.index(top) if top in FLOORS else None


def back_arrows(graph: Graph) -> list[tuple[str, str]]:
    """Imports that point up: a floor into a floor above it (bootstrap into infra, model into
    either) or into policy, ops or tasks; an ops module into tasks; the policy pack into any
    other package of the project but the standalone ground-floor modules."""
    def points_up(module: str, target: str) -> bool:
        here, there = floor(module), floor(target)
        if here is not None:
            return there is None or there > here
        return (module.split(".")[0] == "ops" and target == "tasks") \
            or (room(module) == "policy" and room(target) != "policy"
                and target not in STANDALONE)

    return sorted((module, target) for module, targets in graph.items() for target in targets
                  if points_up(module, target))


def outside_imports(root: Path, package: str) -> dict[str, set[str]]:
    """Module -> the top-level names it imports that are neither the standard library nor
    the package itself (relative imports are the package's own)."""
    found = {}
    for name, path in modules(root, [package]).items():
        tops = {target.split(".")[0] for target in imported_names(path.read_text())}
        outside = {top for top in tops if top != package and top not in sys.stdlib_module_names}
        if outside:
            found[name] = outside
    return found


def project_graph() -> Graph:
    return import_graph(PROJECT_ROOT, PACKAGES, extra=("tasks",))


def test_no_module_imports_in_a_circle():
    assert cycles(project_graph()) == []


def test_no_room_imports_in_a_circle():
    rooms = room_graph(project_graph())
    assert {"ops", "ops.stacks", "ops.review", "ops.lifecycle", "ops.remote", "ops.cloud",
            "policy"} <= set(rooms)
    assert cycles(rooms) == []


def test_no_floor_or_room_imports_upwards():
    assert back_arrows(project_graph()) == []


def test_the_floors_are_rooms_of_their_own():
    rooms = room_graph(project_graph())
    assert {"model", "bootstrap", "infra"} <= set(rooms)
    assert rooms["model"] == set()
    assert rooms["bootstrap"] == {"model"}


def test_what_the_policy_pack_imports_of_model_imports_nothing_of_the_project():
    graph = project_graph()
    assert {name: graph[name] for name in STANDALONE if graph[name]} == {}


def test_model_imports_only_the_standard_library_pydantic_and_yaml():
    third_party = outside_imports(PROJECT_ROOT, "model")
    assert {name: tops - MODEL_THIRD_PARTY for name, tops in third_party.items()
            if tops - MODEL_THIRD_PARTY} == {}


def test_ops_has_no_plain_module_besides_the_shared_few():
    shared = {path.stem for path in (PROJECT_ROOT / "ops").glob("*.py")}
    assert shared == {"__init__", "confirm", "engine", "errors", "paths", "pulumi_types",
                      "task_flags", "task_groups"}


def test_every_room_says_what_it_owns_and_may_import():
    rooms = [*(PROJECT_ROOT / "ops").glob("*/__init__.py"),
             *(PROJECT_ROOT / package / "__init__.py" for package in ("policy", *FLOORS))]
    for init in rooms:
        docstring = ast.get_docstring(ast.parse(init.read_text())) or ""
        assert "Owns" in docstring and "May import" in docstring, init


def test_the_docs_architecture_names_every_room_and_shared_module():
    from tests.support.docs_pages import section as docs_section

    section = docs_section("architecture.md", "## The rooms of `ops/`")
    ops = PROJECT_ROOT / "ops"
    rooms = [f"ops/{init.parent.name}/" for init in sorted(ops.glob("*/__init__.py"))]
    shared = [f"ops/{path.name}" for path in sorted(ops.glob("*.py")) if path.stem != "__init__"]
    assert [name for name in rooms + shared if name not in section] == []


# ---- the checks themselves catch what they are for, on a small tree written here


def write_tree(root: Path, files: Mapping[str, str]) -> None:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text)


def test_a_circle_hidden_inside_a_function_is_found(tmp_path: Path):
    write_tree(tmp_path, {
        "ops/__init__.py": "",
        "ops/a.py": "from ops.b import B\n",
        "ops/b.py": "def late():\n    from ops import a\n    return a\nB = 1\n",
        "ops/c.py": "import ops.a\n",
    })
    assert cycles(import_graph(tmp_path, ["ops"])) == [["ops.a", "ops.b"]]


def test_a_circle_between_rooms_is_found(tmp_path: Path):
    write_tree(tmp_path, {
        "ops/__init__.py": "",
        "ops/paths.py": "",
        "ops/review/__init__.py": "",
        "ops/review/plan.py": "from ops.paths import x\n",
        "ops/lifecycle/__init__.py": "",
        "ops/lifecycle/up.py": "from ops.review.plan import y\n",
        "ops/review/effects.py": "from ops.lifecycle.up import z\n",
    })
    graph = import_graph(tmp_path, ["ops"])
    assert cycles(graph) == []
    assert cycles(room_graph(graph)) == [["ops.lifecycle", "ops.review"]]


def test_an_import_from_infra_into_ops_or_from_ops_into_tasks_is_found(tmp_path: Path):
    write_tree(tmp_path, {
        "infra/__init__.py": "",
        "infra/program.py": "def run():\n    import ops.paths\n",
        "bootstrap/__init__.py": "",
        "bootstrap/local.py": "from model import plan\n",
        "model/__init__.py": "",
        "model/plan.py": "",
        "ops/__init__.py": "",
        "ops/paths.py": "",
        "ops/review/__init__.py": "",
        "ops/review/plan.py": "from tasks import plan\n",
        "policy/__init__.py": "",
        "policy/rules.py": "import infra.program\nfrom model.price_table import load_table\n",
        "model/price_table.py": "",
        "tasks.py": "from ops.review import plan\n",
    })
    graph = import_graph(tmp_path, PACKAGES, extra=("tasks",))
    assert back_arrows(graph) == [("infra.program", "ops.paths"), ("ops.review.plan", "tasks"),
                                  ("policy.rules", "infra.program")]


def test_an_import_up_a_floor_is_found(tmp_path: Path):
    write_tree(tmp_path, {
        "model/__init__.py": "",
        "model/plan.py": "from model import labels\n",
        "model/labels.py": "def late():\n    from bootstrap.file_mounts import x\n",
        "bootstrap/__init__.py": "",
        "bootstrap/file_mounts.py": "from model.plan import p\n",
        "bootstrap/startup.py": "from infra.bucket import b\n",
        "infra/__init__.py": "",
        "infra/bucket.py": "from bootstrap.file_mounts import x\nfrom model import plan\n",
    })
    graph = import_graph(tmp_path, PACKAGES)
    assert back_arrows(graph) == [("bootstrap.startup", "infra.bucket"),
                                  ("model.labels", "bootstrap.file_mounts")]
    assert cycles(room_graph(graph)) == [["bootstrap", "infra", "model"]]


def test_a_model_module_importing_pulumi_is_found(tmp_path: Path):
    write_tree(tmp_path, {
        "model/__init__.py": "",
        "model/plan.py": "import json\nimport yaml\nfrom pydantic import BaseModel\n"
                         "from . import labels\n",
        "model/labels.py": "def late():\n    import pulumi\n",
    })
    assert outside_imports(tmp_path, "model") == {"model.plan": {"yaml", "pydantic"},
                                                  "model.labels": {"pulumi"}}
