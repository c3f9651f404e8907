"""The worker's Celery app under its documented name (``celery -A worker.app worker``); its code is in
``worker.runtime.app``."""

from worker.runtime.app import app

__all__ = ["app"]
