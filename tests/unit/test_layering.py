"""The seams of the code, read from its source (no Spark): one import namespace, pure layers, one way into storage,
a registry below all, and no import circle.

- Every module of the product is imported as `quorumlake.<...>`; no module imports a bare top-level folder name
  (`pipelines`, `gold`, ...), which another library could shadow.
- Only `pipelines/storage/` (every read, write, MERGE and checkpoint), `pipelines/engine/` (starts the engine) and
  `pipelines/serving/` (serves it) import Delta's Python API, run SQL through a session (`spark.sql(...)`), or reach
  into the JVM (`_jvm`, `_jsparkSession`); only `pipelines/storage/` names a table's `_delta_log` or imports delta-rs
  (`deltalake`), and no module spells the shapes of the log's files (checkpoints, 20-digit commit names): the log is
  read through delta-rs or Delta, never by hand.
- The local engine (`quorumlake.pipelines.engine.local`) is imported only inside the functions that start or tune a
  local session: importing every other module of the product does not load it (the Databricks path never does).
- `bronze`, `silver`, `gold`, `expectations`, `simulator`, `collector` and `report` never import `pipelines`;
  `contract` imports nothing of the project.
- Inside `pipelines`, imports point down: app -> jobs, serving -> storage -> engine -> config, errors, progress.
- `benchmarks/` is not part of the product: nothing of it imports it but the thin `quorumlake bench` entry.
"""

from __future__ import annotations

import ast
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
# source folder -> the import name it installs as (pyproject.toml, [tool.setuptools] package-dir)
SOURCES = {
    "quorumlake": "quorumlake",
    "bronze": "quorumlake.bronze",
    "silver": "quorumlake.silver",
    "gold": "quorumlake.gold",
    "expectations": "quorumlake.expectations",
    "pipelines": "quorumlake.pipelines",
    "benchmarks": "benchmarks",
}
OWN = ("quorumlake", "benchmarks")
BARE = ("pipelines", "bronze", "silver", "gold", "expectations", "contract", "tools")
ENGINE_MODULES = ("pipelines/storage/", "pipelines/engine/", "pipelines/serving/")
JVM_ATTRIBUTES = {"_jvm", "_jsparkSession", "_jsc"}
PURE = ("bronze", "silver", "gold", "expectations", "simulator", "collector", "report")
# inside pipelines: a sub-package and what it must not import
PIPELINES_DOWNWARD = {
    "engine": ("app", "jobs", "storage", "serving"),
    "storage": ("app", "jobs", "serving"),
    "jobs": ("app", "serving"),
    "serving": ("app", "jobs"),
}
PIPELINES_BASE = ("config", "errors", "progress")
LOCAL_ENGINE = "quorumlake.pipelines.engine.local"
# how the files of a Delta log are named: its checkpoint pointer and checkpoints, and commits by a 20-digit version
DELTA_LOG_SHAPES = re.compile(r"_last_checkpoint|\.checkpoint\.|:020d|\\d\{20\}|0{19}\d\.json")


def _sources() -> list[Path]:
    return sorted(p for folder in SOURCES for p in (ROOT / folder).rglob("*.py"))


def _relative(path: Path) -> str:
    return path.relative_to(ROOT).as_posix()


def _module(path: Path) -> str:
    folder, *rest = path.relative_to(ROOT).with_suffix("").parts
    parts = [SOURCES[folder], *rest]
    if parts[-1] == "__init__":
        parts.pop()
    return ".".join(parts)


def _imports(tree: ast.AST, members: bool = False) -> set[str]:
    """Every module name imported anywhere in the module (functions included); with `members`, `from x import y` also
    as `x.y` (y may be a module)."""
    names = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            names |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            names.add(node.module)
            if members:
                names |= {f"{node.module}.{alias.name}" for alias in node.names}
    return names


def _tree(path: Path) -> ast.AST:
    return ast.parse(path.read_text(encoding="utf-8"))


def _engine_uses(tree: ast.AST) -> list[str]:
    """Delta imports, `<...>spark.sql(...)` calls and JVM handles in a module."""
    found = [f"import {name}" for name in _imports(tree) if name == "delta" or name.startswith("delta.")]
    for node in ast.walk(tree):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "sql":
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else getattr(owner, "id", "")
            if name in ("spark", "session"):
                found.append(f"line {node.lineno}: {name}.sql(...)")
        if isinstance(node, ast.Attribute) and node.attr in JVM_ATTRIBUTES:
            found.append(f"line {node.lineno}: .{node.attr}")
    return found


def _graph() -> dict[str, set[str]]:
    """module -> the project's modules it imports."""
    modules = {_module(p): p for p in _sources()}
    graph = {}
    for name, path in modules.items():
        targets = set()
        for imported in _imports(_tree(path), members=True):
            # `from quorumlake.gold import isr` names the module quorumlake.gold.isr; `from x import f` only x
            while imported and imported not in modules:
                imported = imported.rpartition(".")[0]
            if imported and imported != name:
                targets.add(imported)
        graph[name] = targets
    return graph


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """The strongly connected components of more than one module (Tarjan)."""
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
            component = []
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.append(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(sorted(component))

    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_the_sources_are_found():
    names = {_module(p) for p in _sources()}
    assert {
        "quorumlake.pipelines.storage.writes",
        "quorumlake.contract.tables",
        "quorumlake.gold.isr",
        "quorumlake.simulator.fleet",
        "benchmarks.bench",
    } <= names


@pytest.mark.parametrize("path", _sources(), ids=_relative)
def test_every_import_of_the_project_goes_through_the_quorumlake_namespace(path):
    bare = sorted(name for name in _imports(_tree(path)) if name.split(".")[0] in BARE)
    assert bare == []


@pytest.mark.parametrize("path", [p for p in _sources() if not _relative(p).startswith(ENGINE_MODULES)], ids=_relative)
def test_only_the_storage_and_engine_modules_touch_delta_sql_or_the_jvm(path):
    assert _engine_uses(_tree(path)) == []


@pytest.mark.parametrize(
    "path", [p for p in _sources() if not _relative(p).startswith("pipelines/storage/")], ids=_relative
)
def test_only_storage_names_the_delta_log(path):
    assert "_delta_log" not in path.read_text(encoding="utf-8")


@pytest.mark.parametrize(
    "path", [p for p in _sources() if not _relative(p).startswith("pipelines/storage/")], ids=_relative
)
def test_only_storage_imports_delta_rs(path):
    assert sorted(n for n in _imports(_tree(path)) if n.split(".")[0] == "deltalake") == []


@pytest.mark.parametrize("path", _sources(), ids=_relative)
def test_no_module_reads_the_delta_log_s_files_by_hand(path):
    assert DELTA_LOG_SHAPES.findall(path.read_text(encoding="utf-8")) == []


def _top_level_imports(tree: ast.Module) -> set[str]:
    """The modules a module imports when it is imported (not inside a function or class body)."""
    names = set()
    for node in tree.body:
        for inner in (
            ast.walk(node) if not isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) else ()
        ):
            if isinstance(inner, ast.Import):
                names |= {alias.name for alias in inner.names}
            elif isinstance(inner, ast.ImportFrom) and inner.module and not inner.level:
                names |= {inner.module, *(f"{inner.module}.{alias.name}" for alias in inner.names)}
    return names


@pytest.mark.parametrize("path", _sources(), ids=_relative)
def test_the_local_engine_is_imported_only_where_a_local_session_is_started_or_tuned(path):
    assert LOCAL_ENGINE not in _top_level_imports(_tree(path))


def test_importing_the_product_does_not_load_the_local_engine():
    modules = sorted(
        _module(p) for p in _sources() if _module(p) != LOCAL_ENGINE and not _module(p).startswith("benchmarks")
    )
    script = (
        "import importlib, sys\n"
        f"for name in {modules!r}:\n"
        "    importlib.import_module(name)\n"
        f"print({LOCAL_ENGINE!r} in sys.modules)\n"
    )
    done = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=300, cwd=ROOT)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-1] == "False"


def test_the_check_sees_what_it_forbids():
    tree = ast.parse(
        "from delta.tables import DeltaTable\n"
        "lakehouse.spark.sql('OPTIMIZE x')\n"
        "spark.sql('SELECT 1')\n"
        "spark.sparkContext._jvm.java.lang.System\n"
    )
    assert len(_engine_uses(tree)) == 4
    assert _engine_uses(ast.parse("df.where(bounds.sql())\nF.expr('x')\n")) == []
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]
    assert _cycles({"a": {"b"}, "b": set()}) == []
    for spelled in (
        'f"{version:020d}.json"',
        "'_last_checkpoint'",
        'f"{v}.checkpoint.parquet"',
        r"re.compile(r'\d{20}')",
    ):
        assert DELTA_LOG_SHAPES.search(spelled), spelled
    assert not DELTA_LOG_SHAPES.search("DeltaTable(path).version()")
    tree = ast.parse(f"import os\ndef f():\n    from {LOCAL_ENGINE} import tune_for\n")
    assert _top_level_imports(tree) == {"os"}
    assert LOCAL_ENGINE in _top_level_imports(ast.parse(f"from {LOCAL_ENGINE} import builder\n"))


def test_no_import_circle():
    assert _cycles(_graph()) == []


def _violations(prefix: str, forbidden: tuple[str, ...]) -> dict[str, list[str]]:
    graph = _graph()
    wrong = {
        module: sorted(t for t in targets if t.startswith(forbidden))
        for module, targets in graph.items()
        if module == prefix or module.startswith(prefix + ".")
    }
    return {module: names for module, names in wrong.items() if names}


@pytest.mark.parametrize("package", PURE)
def test_the_layers_and_tools_do_not_import_the_pipelines(package):
    assert _violations(f"quorumlake.{package}", ("quorumlake.pipelines", "benchmarks")) == {}


def test_the_registry_imports_nothing_of_the_project():
    assert _violations("quorumlake.contract", OWN) == {}


@pytest.mark.parametrize("package", sorted(PIPELINES_DOWNWARD))
def test_pipelines_imports_point_down(package):
    forbidden = tuple(f"quorumlake.pipelines.{name}" for name in PIPELINES_DOWNWARD[package]) + ("benchmarks",)
    assert _violations(f"quorumlake.pipelines.{package}", forbidden) == {}


@pytest.mark.parametrize("module", PIPELINES_BASE)
def test_the_pipelines_base_modules_import_no_other_part_of_pipelines(module):
    assert _violations(f"quorumlake.pipelines.{module}", ("quorumlake.pipelines",)) == {}


def test_only_the_bench_entry_imports_the_benchmarks():
    graph = _graph()
    importers = sorted(
        m for m, targets in graph.items() if not m.startswith("benchmarks") and "benchmarks.bench" in targets
    )
    assert importers == ["quorumlake.pipelines.app.commands"]
