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
        "errors collector kept",
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


def _pins() -> dict[str, str]:
    lock = (REPO / "requirements" / "cpu-constraints.txt").read_text(encoding="utf-8").splitlines()
    pairs = (line.split("==", 1) for line in lock if line and not line.startswith("#"))
    return {name.lower().replace("-", "_"): version for name, version in pairs}


def test_every_requirement_is_pinned_in_the_environment_setup_env_installs() -> None:
    # scripts/setup-env installs the pinned environment with --no-deps: a requirement missing from it would be missing
    # from every development and CI machine
    pins = _pins()
    wanted = (REPO / "requirements-cpu.txt").read_text(encoding="utf-8").splitlines()
    for line in (w.split("#")[0].strip() for w in wanted):
        if line:
            name, version = line.split("==")
            assert pins.get(name.lower().replace("-", "_")) == version, f"{line} is not pinned as such"
    assert _declared() <= set(pins), f"setup.py's requirements not pinned: {sorted(_declared() - set(pins))}"


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


def runtime_imports_outside_runtimes(root: Path, package: str = "vllm_hpu_mm") -> list[str]:
    """Every import of a runtime's own package (``{package}.runtimes.vllm_*``, absolute or relative, a module or a
    name from it) by a module outside ``{package}/runtimes/``, as ``module:line imports target``. Code reaches a
    runtime through the registry and its entry; a runtime's variable or helper imported elsewhere ties that code to
    the runtime."""
    runtime_package = re.compile(rf"{re.escape(package)}\.runtimes\.vllm_")
    found = []
    for path in sorted((root / package).rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        is_init = parts[-1] == "__init__"
        name = ".".join(parts[:-1] if is_init else parts)
        if name == f"{package}.runtimes" or name.startswith(f"{package}.runtimes."):
            continue
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if not isinstance(node, ast.Import | ast.ImportFrom):
                continue
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            else:
                base = node.module or ""
                if node.level:  # relative: from the module's package, up level - 1 more
                    here = name.split(".") if is_init else name.split(".")[:-1]
                    base = ".".join([*here[: len(here) - node.level + 1], *([node.module] if node.module else [])])
                targets = [base, *(f"{base}.{a.name}" for a in node.names)]
            hit = next((t for t in targets if runtime_package.match(t)), None)
            if hit is not None:
                found.append(f"{name}:{node.lineno} imports {hit}")
    return found


def test_no_runtime_package_is_imported_outside_runtimes() -> None:
    """Names and imports: the registry and the entries are the only way in (jobs, cli and the plugin included)."""
    assert runtime_imports_outside_runtimes(REPO) == []


def test_the_runtime_import_check_finds_a_planted_import_in_every_spelling(tmp_path: Path) -> None:
    files = {
        "__init__.py": "",
        "runtimes/__init__.py": "",
        "runtimes/registry.py": "from vllm_hpu_mm.runtimes import vllm_x\n",  # inside runtimes/: allowed
        "runtimes/vllm_x/__init__.py": "VAR = 'X'\n",
        "runtimes/vllm_x/config.py": "from .. import registry\n",
        "jobs/__init__.py": "",
        "jobs/absolute.py": "from vllm_hpu_mm.runtimes.vllm_x import VAR\n",
        "jobs/relative.py": "from ..runtimes.vllm_x import VAR\n",
        "jobs/module.py": "from ..runtimes import vllm_x\n",
        "cli/__init__.py": "",
        "cli/plain.py": "import vllm_hpu_mm.runtimes.vllm_x.config\n",
        "cli/late.py": "def f() -> None:\n    from vllm_hpu_mm.runtimes.vllm_x.config import registry\n",
        "cli/fine.py": "from vllm_hpu_mm.runtimes import registry\nfrom vllm_hpu_mm.runtimes.base import Runtime\n",
    }
    for rel, text in files.items():
        path = tmp_path / "vllm_hpu_mm" / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(text, encoding="utf-8")
    found = runtime_imports_outside_runtimes(tmp_path)
    assert found == [
        "vllm_hpu_mm.cli.late:2 imports vllm_hpu_mm.runtimes.vllm_x.config",
        "vllm_hpu_mm.cli.plain:1 imports vllm_hpu_mm.runtimes.vllm_x.config",
        "vllm_hpu_mm.jobs.absolute:1 imports vllm_hpu_mm.runtimes.vllm_x",
        "vllm_hpu_mm.jobs.module:1 imports vllm_hpu_mm.runtimes.vllm_x",
        "vllm_hpu_mm.jobs.relative:1 imports vllm_hpu_mm.runtimes.vllm_x",
    ]


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


def _class_fields(name: str) -> Iterator[tuple[str, str]]:
    """(module:Class, field) of every annotated field declared in a class body of module ``name``."""
    for node in ast.walk(ast.parse(MODULES[name].read_text(encoding="utf-8"))):
        if isinstance(node, ast.ClassDef):
            for stmt in node.body:
                if isinstance(stmt, ast.AnnAssign) and isinstance(stmt.target, ast.Name):
                    yield f"{name}:{node.name}", stmt.target.id


def test_the_engine_limits_are_declared_in_at_most_four_places() -> None:
    """The flag as parsed (plan/args), the plan's inputs, the engine's shape and the runtime's batch limits: a fifth
    type holding ``max_num_seqs`` is a repacking (the house issue's rule); hold one of these instead."""
    holders = sorted(where for name in MODULES for where, field in _class_fields(name) if field == "max_num_seqs")
    assert len(holders) <= 4, holders
