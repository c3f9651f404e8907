"""``worker.app`` with a poisoned engine, for the poison-document test: a document containing
POISON-CRASH kills its worker process (as a segfault would), POISON-HANG never returns."""

from __future__ import annotations

import os
import time

from worker import documents
from worker.app import app

__all__ = ["app"]
_translate = documents.DocumentTranslator.translate


def _poisoned(self, docs, options=None):
    for _, text in docs:
        if "POISON-CRASH" in text:
            os._exit(70)
        if "POISON-HANG" in text:
            time.sleep(3600)
    return _translate(self, docs, options)


documents.DocumentTranslator.translate = _poisoned  # type: ignore[method-assign]
