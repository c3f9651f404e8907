"""A full disk's check passes only with room to spare, so a worker whose disk has a few KiB left stays out of
the queue instead of taking a chunk, filling it again and flapping healthy/unhealthy every heartbeat."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from types import SimpleNamespace

import pytest

from tests.services import ROOT
from worker.monitoring import health

FILL = """
import os, sys
from worker.monitoring import health
folder = sys.argv[1]
check = {"kind": "disk", "target": folder}
fd = os.open(os.path.join(folder, "filler"), os.O_WRONLY | os.O_CREAT)
try:
    while True:
        os.write(fd, b"x" * 2**16)
except OSError:
    pass
full = health.passes(check)
os.ftruncate(fd, os.fstat(fd).st_size - 2**20)  # 1 MiB of 16 free again: a 64 KiB write fits
little = health.passes(check)
os.close(fd)
os.remove(os.path.join(folder, "filler"))
print(full, little, health.passes(check))
"""


def can_mount() -> bool:
    return shutil.which("unshare") is not None and subprocess.run(["unshare", "-m", "true"]).returncode == 0


@pytest.mark.skipif(not can_mount(), reason="needs `unshare -m` (root, or CAP_SYS_ADMIN) to mount a small disk")
def test_a_full_disk_with_a_little_room_is_not_healthy_again_until_it_has_headroom(tmp_path) -> None:
    disk = tmp_path / "disk"
    disk.mkdir()
    small = f'mount -t tmpfs -o size=16m none {disk} && exec "$@"'  # a 16 MiB disk of its own
    command = ["unshare", "-m", "sh", "-c", small, "sh", sys.executable, "-c", FILL, str(disk)]
    env = {**os.environ, "PYTHONPATH": str(ROOT)}
    result = subprocess.run(command, env=env, capture_output=True, text=True, timeout=180)
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == ["False", "False", "True"]  # full; 1 MiB free; emptied


def test_a_disk_passes_with_64_mib_free_or_a_tenth_of_a_small_one(tmp_path, monkeypatch) -> None:
    check = {"kind": "disk", "target": str(tmp_path)}
    free = {"bytes": 0, "size": 2**40}

    def statvfs(_: str) -> SimpleNamespace:
        return SimpleNamespace(f_frsize=4096, f_bavail=free["bytes"] // 4096, f_blocks=free["size"] // 4096)

    monkeypatch.setattr(os, "statvfs", statvfs)
    for size, room, passes in [(2**40, 2**20, False), (2**40, 63 * 2**20, False), (2**40, 64 * 2**20, True),
                               (100 * 2**20, 9 * 2**20, False), (100 * 2**20, 10 * 2**20, True)]:  # fmt: skip
        free.update(bytes=room, size=size)
        assert health.passes(check) is passes, (size, room)
    assert not health.passes({"kind": "disk", "target": str(tmp_path / "missing")})
