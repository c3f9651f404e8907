"""The README's table of settings, made from ``contract/settings.py``: one row per ``FANYI_*`` variable,
its default and the comment beside it. ``python -m scripts.settings_table --write`` updates the README;
``tests/test_readme.py`` fails while the two differ."""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
SETTINGS = ROOT / "contract" / "settings.py"
README = ROOT / "README.md"
BLOCK = re.compile(r"(<!-- settings -->\n).*?(<!-- /settings -->)", re.S)
# _reader("FANYI_NAME", "default", ...) ... # what it means   (the default is optional; the readers are
# contract/settings.py's _text, _optional, _redis_url, _choice, _integer, _number)
READERS = r"_(?:text|optional|redis_url|choice|integer|number)"
SETTING = re.compile(READERS + r'\("(FANYI_\w+)"(?:,\s*("[^"]*"|\w+))?[,)].*#\s*(.+)$')


def rows(source: str) -> list[tuple[str, str, str]]:
    """(variable, default, meaning) of each setting, in the order ``contract/settings.py`` reads them."""
    found = []
    for line in source.splitlines():
        if match := SETTING.search(line):
            name, default, meaning = match.groups()
            found.append((name, _shown(default), meaning.replace("|", "\\|")))
    return found


def _shown(default: str | None) -> str:
    if default is None:
        return "unset"
    if default.startswith('"'):
        return f"`{default[1:-1]}`"
    return f"as `FANYI_{default}`"  # another setting's value


def table(source: str | None = None) -> str:
    lines = ["| Variable | Default | Meaning |", "|---|---|---|"]
    found = rows(source or SETTINGS.read_text())
    lines += [f"| `{name}` | {default} | {meaning} |" for name, default, meaning in found]
    return "\n".join(lines) + "\n"


def readme_table(readme: str) -> str:
    match = BLOCK.search(readme)
    if match is None:
        raise ValueError("README.md has no <!-- settings --> ... <!-- /settings --> block")
    return readme[match.end(1) : match.start(2)]


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m scripts.settings_table", description=__doc__)
    parser.add_argument("--write", action="store_true", help="update README.md (else print the table)")
    args = parser.parse_args(argv)
    if not args.write:
        sys.stdout.write(table())
        return
    readme = README.read_text()
    readme_table(readme)  # the block must be there
    README.write_text(BLOCK.sub(lambda m: m.group(1) + table() + m.group(2), readme))
    print(f"updated the settings table in {README}")


if __name__ == "__main__":
    main()
