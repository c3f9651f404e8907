"""The engines this process has built: one ``Translator`` per artifact, with the worker's settings
(``FANYI_DEVICE``, ``FANYI_PRECISION``, ``FANYI_THREADS``, ``FANYI_SESSIONS``), made after fork and reused
by every chunk; made (and verified) again once the artifact's files changed under it."""

from __future__ import annotations

from contract import settings
from worker.engine.artifact import ArtifactChanged
from worker.engine.translator import Translator

_TRANSLATORS: dict[str, Translator] = {}


def translator_for(artifact: str) -> Translator:
    """This process's engine for ``artifact``; ``ArtifactError`` when it cannot be loaded."""
    translator = _TRANSLATORS.get(artifact)
    if translator is not None:
        try:
            translator.artifact.check_unchanged()
            return translator
        except ArtifactChanged:
            del _TRANSLATORS[artifact]
    translator = Translator(
        artifact, device=settings.DEVICE, precision=settings.PRECISION, threads=settings.THREADS,
        sessions=settings.SESSIONS,
    )  # fmt: skip
    _TRANSLATORS[artifact] = translator
    return translator


def build(artifact: str) -> Translator:
    """The engine for ``artifact`` with its sessions made: whatever keeps it from running raises."""
    translator = translator_for(artifact)
    with translator.pool.acquire():
        pass
    return translator
