"""Helpers the tests of this folder share."""

from __future__ import annotations

import subprocess
import sys


def run_cli(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, "-m", "export_tools", *args], capture_output=True, text=True)
