"""The languages a model reads and writes, in the codes people and language detectors use (ISO 639-1
where a language has one, else ISO 639-3), each with the model's own code for it: m2m100 ``fr``, NLLB
``fra_Latn``, mBART-50 ``fr_XX``, a multilingual Marian's ``fra`` or ``cmn_Hans``, a T5 task's ``en``;
None for a model that reads or writes one fixed language (nothing to pass it).

Where a model's languages come from: its tokenizer's language codes (many-to-many models), its T5
tasks, and for a model that reads or writes one fixed language the pair its manifest declares
(``pair``: export_tools reads it from an ``opus-mt-<source>-<target>`` name, or takes ``--pair``)."""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

# ISO 639-1 -> its ISO 639-3 code, then the individual languages models name instead of the macrolanguage
# (NLLB's ``arb_Arab`` and ``zsm_Latn``, a Marian's ``cmn_Hans``).
_ALPHA3 = """
af afr; am amh; ar ara arb; as asm; az aze azj azb; ba bak; be bel; bg bul; bn ben; bo bod; br bre; bs bos;
ca cat; cs ces; cy cym; da dan; de deu; dz dzo; el ell; en eng; eo epo; es spa; et est ekk; eu eus; fa fas pes;
ff ful fuv; fi fin; fj fij; fo fao; fr fra; fy fry; ga gle; gd gla; gl glg; gn grn; gu guj; ha hau; he heb;
hi hin; hr hrv; ht hat; hu hun; hy hye; id ind; ig ibo; is isl; it ita; ja jpn; jv jav; ka kat; kk kaz; km khm;
kn kan; ko kor; ks kas; ku kur kmr ckb; ky kir; la lat; lb ltz; lg lug; li lim; ln lin; lo lao; lt lit;
lv lav lvs; mg mlg plt; mi mri; mk mkd; ml mal; mn mon khk; mr mar; ms msa zsm; mt mlt; my mya; nb nob;
ne nep npi; nl nld; nn nno; no nor; ny nya; oc oci; om orm gaz; or ori ory; pa pan; pl pol; ps pus pbt;
pt por; qu que quy; ro ron; ru rus; rw kin; sa san; sc srd; sd snd; si sin; sk slk; sl slv; sm smo; sn sna;
so som; sq sqi als; sr srp; ss ssw; st sot; su sun; sv swe; sw swa swh; ta tam; te tel; tg tgk; th tha;
ti tir; tk tuk; tl tgl; tn tsn; tr tur; ts tso; tt tat; ug uig; uk ukr; ur urd; uz uzb uzn; vi vie; wo wol;
xh xho; yi yid ydd; yo yor; zh zho cmn; zu zul
"""
ALPHA3: dict[str, tuple[str, ...]] = {
    fields[0]: tuple(fields[1:]) for fields in (entry.split() for entry in _ALPHA3.split(";")) if fields
}
_ALPHA2 = {alpha3: alpha2 for alpha2, codes in ALPHA3.items() for alpha3 in codes if alpha2 != "no"}


def iso(code: str) -> str:
    """A language code as ISO 639-1 where the language has one (``fra_Latn`` -> ``fr``, ``zh_CN`` -> ``zh``,
    ``pt-BR`` -> ``pt``, ``cmn_Hans`` -> ``zh``), else its ISO 639-3 code; lower case."""
    base = code.replace("-", "_").split("_")[0].lower()
    return _ALPHA2.get(base, base)


@dataclass(frozen=True)
class ModelLanguages:
    """``reads`` and ``writes``: ISO code -> the model's code for it (None: a fixed language, nothing to pass);
    empty when the model does not say."""

    reads: Mapping[str, str | None]
    writes: Mapping[str, str | None]
    default_source: str | None = None  # ISO: what a model that reads several reads when not told
    default_target: str | None = None  # ISO: what a model that writes several writes when not told

    @classmethod
    def of(cls, tokenizer: Any, pair: Mapping[str, str] | None) -> ModelLanguages:
        """A model's languages from its tokenizer (``worker.engine.tokenizer.Tokenizer``) and the fixed pair
        its manifest declares, if any."""
        codes = list(tokenizer.language_ids)
        fixed_source = {iso(pair["source"]): None} if pair and pair.get("source") else {}
        fixed_target = {iso(pair["target"]): None} if pair and pair.get("target") else {}
        if tokenizer.tasks:  # T5: a task per pair, chosen by the languages' own codes
            return cls(_by_iso(t["source"] for t in tokenizer.tasks), _by_iso(t["target"] for t in tokenizer.tasks))
        reads = _by_iso(codes) if tokenizer.source_role == "token" else fixed_source
        writes = _by_iso(codes) if tokenizer.target_role else fixed_target
        defaults = (tokenizer.default_source, tokenizer.default_target)
        return cls(reads, writes, *(iso(code) if code else None for code in defaults))

    def pair(self, source: str | None, target: str | None) -> tuple[str | None, str | None]:
        """The ISO codes of the languages a request reads and writes: ``source`` and ``target`` where given,
        else the model's default, or the one language it reads or writes."""
        source = source or self.default_source or (next(iter(self.reads)) if len(self.reads) == 1 else None)
        target = target or self.default_target or (next(iter(self.writes)) if len(self.writes) == 1 else None)
        return (iso(source) if source else None), (iso(target) if target else None)

    def told(self, target: str | None) -> str | None:
        """What the engine is told to write for a job's ``target``: the code as the job gives it, or nothing
        for a model that writes one fixed language (a ValueError when that is not ``target``)."""
        if target is None or any(code is not None for code in self.writes.values()):
            return target
        if iso(target) not in self.writes:
            fixed = f"into {', '.join(self.writes)} only" if self.writes else "into one fixed language it does not name"
            raise ValueError(f"this model translates {fixed}, not {target}: name an artifact that writes {target}")
        return None


def _by_iso(codes: Iterable[str]) -> dict[str, str | None]:
    """ISO code -> the model's code, the preferred one where it has several for a language: the language's
    own ISO 639-3 code before an individual language's (``zho_Hans`` before ``cmn_Hans``), then by name
    (``zho_Hans`` before ``zho_Hant``)."""
    found: dict[str, str | None] = {}
    for code in sorted(codes, key=lambda c: (_rank(c), c)):
        found.setdefault(iso(code), code)
    return found


def _rank(code: str) -> int:
    base = code.replace("-", "_").split("_")[0].lower()
    alternatives = ALPHA3.get(iso(code), ())
    return alternatives.index(base) if base in alternatives else 0
