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
    assert imported(ROOT / "worker" / "app.py") >= {"contract", "celery"}  # lazy and top-level imports alike
    assert re.search(r"""(environ\.get|getenv|environ\[|_env)\(?\s*["']FANYI_""", 'os.environ.get("FANYI_X")')
