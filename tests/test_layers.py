"""The rooms of the code: ``contract`` (the job contract both sides stand on) imports neither side, the
worker never imports the producer (``jobs``), and only ``contract/settings.py`` reads the environment."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("contract", "worker", "jobs", "export_tools")


def imported(path: Path) -> set[str]:
    """Top-level packages a module imports, at any depth of its code (lazy imports included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            found |= {alias.name.split(".")[0] for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module.split(".")[0])
    return found


ABOVE = {"worker": {"jobs"}, "contract": {"worker", "jobs", "export_tools"}}  # what each may not import


@pytest.mark.parametrize(("package", "forbidden"), ABOVE.items())
def test_a_package_does_not_import_the_rooms_above_it(package: str, forbidden: set[str]) -> None:
    offenders = {str(p.relative_to(ROOT)): imported(p) & forbidden for p in (ROOT / package).rglob("*.py")}
    assert not {k: v for k, v in offenders.items() if v}


def test_only_the_settings_module_reads_fanyi_variables() -> None:
    reads = re.compile(r"""(environ\.get|getenv|environ\[|_env)\(?\s*["']FANYI_""")
    readers = [
        str(path.relative_to(ROOT))
        for package in PACKAGES
        for path in (ROOT / package).rglob("*.py")
        if reads.search(path.read_text())
    ]
    assert set(readers) <= {"contract/settings.py"}  # which reads them through its typed readers


def test_the_checks_see_an_offender() -> None:
    assert imported(ROOT / "worker" / "runtime" / "app.py") >= {"contract", "celery"}  # lazy and top-level alike
    assert re.search(r"""(environ\.get|getenv|environ\[|_env)\(?\s*["']FANYI_""", 'os.environ.get("FANYI_X")')


# worker/'s rooms, and the rooms each may import besides its own: the engine library knows nothing of
# documents, Celery or monitoring; monitoring watches the runtime without importing it.
ROOMS = {
    "engine": set(),
    "documents": {"engine"},
    "monitoring": {"engine"},
    "runtime": {"engine", "documents", "monitoring"},
}
ENTRY_POINTS = {"worker.__main__", "worker.app", "worker.health", "worker.exporter"}  # compose the rooms


def worker_imports() -> dict[str, set[str]]:
    """Each module of worker/ -> the modules of worker/ it imports, at any depth of its code."""
    names = {_module(p) for p in (ROOT / "worker").rglob("*.py")}
    graph: dict[str, set[str]] = {}
    for path in (ROOT / "worker").rglob("*.py"):
        found = set()
        for node in ast.walk(ast.parse(path.read_text())):
            targets: list[str] = []
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
                targets = [f"{node.module}.{alias.name}" if f"{node.module}.{alias.name}" in names else node.module
                           for alias in node.names]  # fmt: skip
            found |= {t for t in targets if t in names}
        graph[_module(path)] = found - {_module(path)}
    return graph


def _module(path: Path) -> str:
    parts = path.relative_to(ROOT).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def cycle(graph: dict[str, set[str]]) -> list[str] | None:
    """One import cycle of ``graph`` (its modules in order), or None."""
    done: set[str] = set()

    def visit(module: str, path: list[str]) -> list[str] | None:
        if module in path:
            return path[path.index(module) :] + [module]
        if module in done:
            return None
        for imported_module in sorted(graph.get(module, ())):
            if found := visit(imported_module, [*path, module]):
                return found
        done.add(module)
        return None

    return next((found for module in sorted(graph) if (found := visit(module, []))), None)


def test_no_import_cycle_in_worker() -> None:
    assert cycle(worker_imports()) is None
    assert cycle({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": set()}) == ["a", "b", "c", "a"]  # the finder finds one


def room_offenders(graph: dict[str, set[str]]) -> dict[str, list[str]]:
    """Each module of a room -> what it imports from rooms it may not import."""
    rooms = {m: m.split(".")[1] for m in graph if m not in ENTRY_POINTS and m != "worker"}
    offenders = {
        module: sorted(i for i in imports if i.split(".")[1] not in ROOMS.get(rooms[module], set()) | {rooms[module]})
        for module, imports in graph.items()
        if module in rooms
    }
    return {k: v for k, v in offenders.items() if v}


def test_worker_is_in_rooms_that_import_only_the_rooms_below_them() -> None:
    graph = worker_imports()
    rooms = {m.split(".")[1] for m in graph if m not in ENTRY_POINTS and m != "worker"}
    assert rooms == set(ROOMS)  # every module of worker/ is in a room or is an entry point
    assert not room_offenders(graph)
    assert "worker.monitoring.fleet" in graph["worker.runtime.deliveries"]  # the graph sees imports
    assert room_offenders({"worker.engine.a": {"worker.runtime.b"}, "worker.runtime.b": {"worker.engine.a"}}) == {
        "worker.engine.a": ["worker.runtime.b"]
    }
