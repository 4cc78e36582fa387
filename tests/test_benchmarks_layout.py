"""benchmarks/ by claim (issue 31): one folder per kind of claim, shared code in benchmarks/common.py only, every
result file named by the script that writes it, and benchmarks/README.md listing every script and result."""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
BENCH = ROOT / "benchmarks"
FOLDERS = ("agreement", "planner", "performance", "fits", "research")
README = (BENCH / "README.md").read_text(encoding="utf-8")
#: Tests that still import a script, with why. The warm-up fit's reader is owned by another branch this round.
TEST_IMPORTS_OF_SCRIPTS = {("tests/runtimes/test_warmup.py", "benchmarks.fits.warmup_time_fitting")}
#: Old paths the docs must still cite because the package prints them and the docs' samples are its real output
#: (vllm_hpu_mm/runtimes/warmup.py, owned by another branch this round): gone once the package names the new path.


def _modules() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (BENCH / folder).glob("*.py"))


def _is_script(path: Path) -> bool:
    return '__name__ == "__main__"' in path.read_text(encoding="utf-8")


def _benchmark_imports(path: Path) -> set[str]:
    """Every ``benchmarks...`` module ``path`` imports (``from benchmarks import x`` names ``benchmarks.x``)."""
    out: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out |= {a.name for a in node.names if a.name.split(".")[0] == "benchmarks"}
        elif isinstance(node, ast.ImportFrom) and node.module and node.module.split(".")[0] == "benchmarks":
            subs = {f"{node.module}.{a.name}" for a in node.names}
            out |= {s for s in subs if _module_path(s) is not None} or {node.module}
    return out


def _module_path(module: str) -> Path | None:
    path = ROOT.joinpath(*module.split("."))
    return path.with_suffix(".py") if path.with_suffix(".py").exists() else None


def _readme_rows() -> list[list[str]]:
    rows = [[c.strip() for c in line.strip().strip("|").split("|")] for line in README.splitlines()]
    return [
        r for r in rows if len(r) == 5 and not set(r[0]) <= {"-"} and r[0] not in ("claim (where in the docs)", "what")
    ]


def _names(cell: str) -> list[str]:
    return re.findall(r"`([^`]+)`", cell)


def _scripts_named(cell: str) -> list[str]:
    """The benchmark modules a README cell names by their path under benchmarks/ (``folder/name.py``)."""
    return [n for n in _names(cell) if n.endswith(".py") and n.split("/")[0] in FOLDERS]


def test_every_module_sits_in_a_claim_folder() -> None:
    assert sorted(p.name for p in BENCH.glob("*.py")) == ["__init__.py", "common.py"]
    folders = sorted(p.name for p in BENCH.iterdir() if p.is_dir() and p.name != "__pycache__")
    assert folders == sorted(FOLDERS)
    for folder in FOLDERS:
        inner = sorted(p.name for p in (BENCH / folder).iterdir() if p.is_dir() and p.name != "__pycache__")
        # results/ beside each script; a fit's input points (data/) beside the fit
        assert inner in ([], ["results"], ["data", "results"] if folder == "fits" else ["results"]), folder


def test_only_research_holds_libraries() -> None:
    # a module without an entry point outside research/ would be a helper: it belongs in common.py
    libraries = [p for p in _modules() if not _is_script(p) and not p.name.startswith("test_")]
    assert [p.parent.name for p in libraries] == ["research"] * len(libraries)


def test_no_script_imports_another_script() -> None:
    allowed = {"benchmarks.common"} | {
        f"benchmarks.research.{p.stem}" for p in (BENCH / "research").glob("*.py") if not _is_script(p)
    }
    wrong = {
        str(p.relative_to(ROOT)): sorted(_benchmark_imports(p) - allowed) for p in [*_modules(), BENCH / "common.py"]
    }
    assert {k: v for k, v in wrong.items() if v} == {}
    assert _benchmark_imports(BENCH / "common.py") == set()


def test_tests_import_no_benchmark_script() -> None:
    found = set()
    for path in ROOT.joinpath("tests").rglob("*.py"):
        for module in _benchmark_imports(path):
            module_path = _module_path(module)
            if module_path is not None and module != "benchmarks.common" and _is_script(module_path):
                found.add((str(path.relative_to(ROOT)), module))
    assert found == TEST_IMPORTS_OF_SCRIPTS


def test_common_imports_neither_vllm_nor_torch() -> None:
    # the vllm-gaudi driver imports common in its child before vLLM is set up there, and GPU runs import it too
    probe = "import sys, benchmarks.common; print(sorted({'vllm', 'torch'} & set(sys.modules)))"
    out = subprocess.run([sys.executable, "-c", probe], cwd=ROOT, capture_output=True, text=True, check=True)
    assert out.stdout.strip() == "[]"


def test_readme_lists_every_script_once_per_claim_and_nothing_that_is_gone() -> None:
    listed = {name for row in _readme_rows() for name in _scripts_named(row[1])}
    on_disk = {str(p.relative_to(BENCH)) for p in _modules()}
    assert on_disk - listed == set(), "scripts missing from benchmarks/README.md"
    assert listed - on_disk == set(), "benchmarks/README.md names scripts that do not exist"


def _results() -> list[Path]:
    return sorted(p for folder in FOLDERS for p in (BENCH / folder / "results").glob("*") if p.is_file())


def _stem(path: Path) -> str:
    return path.name.removesuffix(".json").removesuffix(".md")


@pytest.mark.parametrize("result", _results(), ids=lambda p: str(p.relative_to(BENCH)))
def test_every_result_is_named_by_the_script_that_writes_it(result: Path) -> None:
    stem = _stem(result)
    rows = [r for r in _readme_rows() if stem in {n.split("/")[-1] for n in _names(r[2])}]
    assert len(rows) == 1, f"{stem}: in {len(rows)} rows of benchmarks/README.md"
    writers = [n for n in _scripts_named(rows[0][1]) if not n.split("/")[-1].startswith("test_")]
    if not writers:  # only research keeps records no script writes now; its row says what wrote them
        assert result.parent.parent.name == "research", f"{stem}: no script writes it"
        assert "written by" in rows[0][1] or "hand-written" in rows[0][1]
        return
    (writer,) = writers
    assert (BENCH / writer).parent == result.parent.parent, f"{stem}: results live beside their script"
    source = (BENCH / writer).read_text(encoding="utf-8")
    # the stem itself, or a variant the row's command names (--name, --stock, --budget-share ...) of a stem the
    # script composes: its text holds the part before the variant
    prefix = stem.rsplit("_", 1)[0]
    assert stem in source or (stem in rows[0][3] and prefix in source), f"{writer} does not write {stem}"


def _cited_paths(text: str) -> set[str]:
    """Paths under benchmarks/ that ``text`` names, as text or as quoted parts joined with ``/`` in code."""
    # a path after "commit:" is history (git show), not a citation
    # (another project's folder of that name, vLLM's ``vllm/benchmarks/serve.py``, is not ours: a "/" before it)
    cited = {m.rstrip(".,") for m in re.findall(r"(?<![\w.:/])(?:\.\./)?(benchmarks/[\w./{},*-]*[\w*}/])", text)}
    joined = re.findall(r'"benchmarks"((?:\s*/\s*"[\w.-]+")+)', text)
    return cited | {"benchmarks/" + "/".join(re.findall(r'"([\w.-]+)"', j)) for j in joined}


@pytest.mark.parametrize("doc", ["README.md", "docs", "tests", "scripts", "benchmarks", "vllm_hpu_mm"])
def test_cited_benchmark_paths_exist(doc: str) -> None:
    paths = [ROOT / doc] if doc.endswith(".md") else [p for p in (ROOT / doc).rglob("*") if p.suffix in (".md", ".py")]
    missing = []
    for path in paths:
        if "results" in path.parts:  # results are records as they were written, old paths included
            continue
        for cited in _cited_paths(path.read_text(encoding="utf-8")):
            base = re.sub(r"\{[^}]*\}.*$|\*.*$", "", cited).removeprefix("../").rstrip("./_")
            if not list(ROOT.glob(base + "*")):
                missing.append(f"{path.relative_to(ROOT)}: {cited}")
    assert missing == []
