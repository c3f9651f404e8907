"""Glossary terms put into a sentence's translation (``contract.glossary``), or the sentence says it could not.

A term's target is put where the model wrote the term's words: the words are translated on their own (one
engine call for every term of a batch, as the words a mark encloses are: ``worker.documents.markup``), and the
longest start of that translation that the sentence's translation holds (whole words, or two characters of an
unspaced script at least: a model that knows sentences may go on after a lone word, ``Chicago`` -> ``芝加哥距离…``)
is taken for the term's rendering and replaced by the target. A target already in the translation
stays; a term whose rendering is not there is missed: its sentence is flagged ``term_missed`` (its document
``partial``). A sentence with no term is left as it was: with no glossary, or none of its terms in a document,
the output is the same as without one.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from contract.glossary import SPACED_WORD, Match

_ENDS = " \t\n。．.!！?？;；:：,，、"  # what a rendering of a few words may end with that the sentence does not


@dataclass(frozen=True)
class Applied:
    translation: str
    applied: int  # terms whose target is in the translation
    missed: int  # terms whose target could not be put in


def apply(translation: str, matches: Sequence[Match], renderings: Mapping[str, str]) -> Applied:
    """``translation`` with the target of each of ``matches`` put in; ``renderings``: each term's words (as
    the source writes them) -> the model's translation of them alone."""
    out, applied, missed = translation, 0, 0
    needed: Counter[str] = Counter()
    for match in matches:
        target = match.term.target
        needed[target] += 1
        if out.count(target) >= needed[target]:
            applied += 1
            continue
        rendered = _rendering(renderings.get(match.words, ""), out)
        if rendered:
            out = out.replace(rendered, target, 1)
            applied += 1
        else:
            missed += 1
    return Applied(out, applied, missed)


def _rendering(alone: str, translation: str) -> str | None:
    """The longest start of ``alone`` (the words translated on their own) that ``translation`` holds: whole words
    of a spaced script, or at least two characters."""
    alone = alone.strip(_ENDS)
    for end in range(len(alone), 1, -1):
        inside_a_word = end < len(alone) and SPACED_WORD.match(alone[end - 1]) and SPACED_WORD.match(alone[end])
        prefix = alone[:end].rstrip(_ENDS)
        if not inside_a_word and len(prefix) >= 2 and prefix in translation:
            return prefix
    return None
