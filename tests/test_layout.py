"""The package's layout keeps its promises: no import circle, every import points down the floors of the house (one
stated exception), the plan reads runtimes only through their model, no folder holds most of the package, and every
third-party import is declared in setup.py."""

from __future__ import annotations

import ast
import re
import sys
from collections.abc import Iterator
from pathlib import Path

from tests.support.data import REPO

PACKAGE = REPO / "vllm_hpu_mm"
#: Imported by the plugin or the served model only, from the serving runtime's own environment (vLLM brings them).
RUNTIME_PROVIDED = {"vllm", "torch", "torchvision", "transformers", "habana_frameworks", "vllm_gaudi"}


def _module(path: Path) -> str:
    parts = path.relative_to(REPO).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module(p): p for p in PACKAGE.rglob("*.py")}


def _imports(name: str, *, top_level_only: bool) -> Iterator[ast.Import | ast.ImportFrom]:
    tree = ast.parse(MODULES[name].read_text(encoding="utf-8"))
    nodes = tree.body if top_level_only else list(ast.walk(tree))
    for node in nodes:
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node


def _package_imports(name: str, *, top_level_only: bool = True) -> set[str]:
    """The package's modules ``name`` imports (a module's parents come with it)."""
    out: set[str] = set()
    for node in _imports(name, top_level_only=top_level_only):
        targets = [a.name for a in node.names] if isinstance(node, ast.Import) else []
        if isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parent = name.split(".")[: len(name.split(".")) - node.level + (MODULES[name].name == "__init__.py")]
                base = ".".join([*parent, *([node.module] if node.module else [])])
            targets = [base, *(f"{base}.{a.name}" for a in node.names)]
        for target in targets:
            parts = target.split(".")
            out |= {".".join(parts[:i]) for i in range(1, len(parts) + 1) if ".".join(parts[:i]) in MODULES}
    out.discard(name)
    return out


def test_no_module_imports_itself_back_through_others() -> None:
    graph = {name: _package_imports(name) for name in MODULES}
    # Tarjan's strongly connected components: a component of more than one module is an import circle.
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    circles: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in stack:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                component.append(w)
                if w == v:
                    break
            # a package importing its own submodule is not a circle unless the submodule imports it back
            if len(component) > 1 and not all(c.startswith(min(component, key=len)) for c in component):
                circles.append(sorted(component))

    sys.setrecursionlimit(10_000)
    for v in graph:
        if v not in index:
            visit(v)
    assert not circles


#: The package's rooms, bottom floor first: a module imports only rooms on lower floors than its own (and its own
#: room). Rooms on one floor are independent of each other.
FLOORS: tuple[frozenset[str], ...] = tuple(
    frozenset(rooms.split())
    for rooms in (
        "errors",
        "values engine",
        "envs traffic",
        "models preprocess",
        "buckets",
        "runtimes graphs",
        "replay plugin",
        "plan",
        "logs",
        "jobs",
        "cli",
    )
)
#: Arrows that run up by design, (from module, to module): each runtime's exporter reads the plan it exports (the
#: plan reads runtimes only through their model, so the two halves never meet in one import chain).
UPWARD_BY_DESIGN = {
    ("vllm_hpu_mm.runtimes.exporting", "vllm_hpu_mm.plan"),
    ("vllm_hpu_mm.runtimes.exporting", "vllm_hpu_mm.plan.planner"),
    ("vllm_hpu_mm.runtimes.exports", "vllm_hpu_mm.plan"),
    ("vllm_hpu_mm.runtimes.exports", "vllm_hpu_mm.plan.planner"),
}


def _room(module: str) -> str:
    return module.split(".")[1] if module.count(".") else ""


def _floor(room: str) -> int:
    return next(i for i, rooms in enumerate(FLOORS) if room in rooms)


def test_every_room_has_a_floor() -> None:
    rooms = {_room(m) for m in MODULES} - {"", "__main__"}
    assert rooms <= set().union(*FLOORS), rooms - set().union(*FLOORS)


def test_every_import_points_down_the_floors_but_the_exporters_reading_the_plan() -> None:
    upward = set()
    for name in MODULES:
        source = _room(name)
        if source in ("", "__main__"):
            continue
        for target in _package_imports(name, top_level_only=False):
            room = _room(target)
            if room in ("", source) or (name, target) in UPWARD_BY_DESIGN:
                continue
            if _floor(room) >= _floor(source):
                upward.add(f"{name} -> {target}")
    assert not upward, sorted(upward)


def test_the_plan_reads_runtimes_only_through_their_model() -> None:
    allowed = {"vllm_hpu_mm.runtimes", "vllm_hpu_mm.runtimes.base", "vllm_hpu_mm.runtimes.registry"}
    for name in MODULES:
        if name.startswith("vllm_hpu_mm.plan."):
            runtime_modules = {
                m for m in _package_imports(name, top_level_only=False) if m.startswith("vllm_hpu_mm.runtimes")
            }
            assert runtime_modules <= allowed, (name, runtime_modules - allowed)


def test_no_top_level_folder_holds_more_than_a_quarter_of_the_package() -> None:
    lines = {p: len(p.read_text(encoding="utf-8").splitlines()) for p in PACKAGE.rglob("*.py")}
    total = sum(lines.values())
    for folder in (p for p in PACKAGE.iterdir() if p.is_dir() and (p / "__init__.py").exists()):
        share = sum(n for p, n in lines.items() if folder in p.parents) / total
        assert share <= 0.25, f"{folder.name}/ holds {share:.0%} of the package's lines"


def _declared() -> set[str]:
    text = (REPO / "setup.py").read_text(encoding="utf-8")
    block = re.search(r"install_requires=\[(.*?)\]", text, re.S)
    assert block
    names = re.findall(r"[\"']([A-Za-z0-9_.-]+)", block.group(1))
    return {n.lower().replace("-", "_") for n in names}


#: Import name -> distribution name, where they differ.
DISTRIBUTION = {"PIL": "pillow", "yaml": "pyyaml"}


def test_every_third_party_import_is_declared_or_the_runtimes() -> None:
    declared = _declared()
    stdlib = set(sys.stdlib_module_names)
    missing = set()
    for name in MODULES:
        for node in _imports(name, top_level_only=False):
            if isinstance(node, ast.ImportFrom) and node.level:
                continue
            targets = [a.name for a in node.names] if isinstance(node, ast.Import) else [node.module or ""]
            for target in targets:
                top = target.split(".")[0]
                if top in stdlib or top == "vllm_hpu_mm" or top in RUNTIME_PROVIDED:
                    continue
                if DISTRIBUTION.get(top, top).lower().replace("-", "_") not in declared:
                    missing.add(f"{top} ({name})")
    assert not missing, f"imported but not in setup.py's install_requires: {sorted(missing)}"


def test_no_runtime_is_named_outside_its_own_folder_and_the_registry() -> None:
    """Code tells runtimes apart by their traits and registry entries, never by naming one (adding a runtime
    touches its folder, its enum member and one registry line)."""
    named = []
    for name, path in MODULES.items():
        if name.startswith("vllm_hpu_mm.runtimes.vllm_") or name == "vllm_hpu_mm.runtimes.registry":
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if (isinstance(node, ast.Attribute) and isinstance(node.value, ast.Name) and node.value.id == "Runtime"
                    and node.attr.startswith("VLLM_")):  # fmt: skip
                named.append(f"{name}:{node.lineno} Runtime.{node.attr}")
            if isinstance(node, ast.Compare) and any(
                isinstance(c, ast.Constant) and c.value in {"vllm-gaudi", "vllm-fork", "vllm-cuda", "vllm-cpu"}
                for c in (node.left, *node.comparators)
            ):
                named.append(f"{name}:{node.lineno} compares with a runtime's name")
    assert not named, named


def test_every_module_imports_with_the_declared_dependencies_or_wants_only_the_runtime() -> None:
    """Imported for real (scripts/test-plain runs this in a virtualenv holding only setup.py's dependencies): a
    module may fail to import only for want of a package the serving runtime brings (vLLM, torch, ...)."""
    import importlib

    wrong = []
    for name in sorted(MODULES):
        if name.endswith(".__main__"):  # runs the CLI when imported
            continue
        try:
            importlib.import_module(name)
        except ModuleNotFoundError as e:
            if (e.name or "").split(".")[0] not in RUNTIME_PROVIDED:
                wrong.append(f"{name}: {e}")
    assert not wrong, wrong
