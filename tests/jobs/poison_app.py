"""``worker.runtime.app`` with a poisoned engine, for the poison-document test: a document containing
POISON-CRASH kills its worker process (as a segfault would), POISON-HANG never returns, POISON-STUBBORN
ignores the soft time limit too. With
``FANYI_TEST_KILL_IN_FINALIZE`` set to a file that does not exist yet, the task that wrote a job's
last part creates that file and kills its whole worker (main process and pool, as an OOM kill of its
container does) before it writes ``_SUCCESS``."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path

from celery.exceptions import SoftTimeLimitExceeded

from worker.documents.translator import DocumentTranslator
from worker.runtime import tasks
from worker.runtime.app import app

__all__ = ["app"]
_translate = DocumentTranslator.translate


def _poisoned(self, docs, options=None, given=None):
    for _, text in docs:
        if "POISON-CRASH" in text:
            os._exit(70)
        if "POISON-HANG" in text:
            time.sleep(3600)
        if "POISON-STUBBORN" in text:  # deaf to the soft time limit, as a stuck native call is: the hard one kills
            try:
                time.sleep(3600)
            except SoftTimeLimitExceeded:
                time.sleep(3600)
    return _translate(self, docs, options, given)


DocumentTranslator.translate = _poisoned  # type: ignore[method-assign]


_finalize = tasks.finalize


def _killed_in_finalize(storage, job):
    marker = Path(os.environ["FANYI_TEST_KILL_IN_FINALIZE"])
    if not marker.exists():
        marker.touch()
        os.killpg(os.getpgid(0), signal.SIGKILL)
    return _finalize(storage, job)


if os.environ.get("FANYI_TEST_KILL_IN_FINALIZE"):
    tasks.finalize = _killed_in_finalize  # type: ignore[assignment]
