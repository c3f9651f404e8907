"""A multilingual corpus through Redis and a real worker: each document's language found (or given by its row),
routed to an artifact that reads it, and translated into several targets, each by its own artifact."""

from __future__ import annotations

import json
from collections import Counter

from contract.storage import open_storage
from tests.jobs.conftest import jobs_cli, output_rows, wait
from tests.worker.documents.test_languages import strings

FOUND_IN_TEXT = ("zh", "fr", "de", "es", "ja")  # besides English: the catalogues' languages in the corpus


def _corpus(tmp_path) -> tuple[str, dict[str, str]]:
    """English documents the demo model knows; Chinese, French, German, Spanish and Japanese ones from Debian's
    catalogues; a code-only and a number-only document (no language: the fallback, English); one English
    document whose row says it is French (``lang``). Each id's language as the job must take it."""
    english = [f"Tom has {n} apples. The meeting starts at 9 am." for n in range(2, 8)]
    rows = [{"id": f"en-{k}", "text": text} for k, text in enumerate(english)]
    for language in FOUND_IN_TEXT:
        rows += [{"id": f"{language}-{k}", "text": text} for k, text in enumerate(strings(language, short=False)[:2])]
    rows += [{"id": "code", "text": "for (i = 0; i < n; i++) { sum += a[i]; }"}]
    rows += [{"id": "numbers", "text": "12345 67 890"}]
    rows += [{"id": "said-fr", "text": english[0], "lang": "fr"}]
    path = tmp_path / "mixed.jsonl"
    path.write_text("".join(json.dumps(row) + "\n" for row in rows))
    languages = {row["id"]: row.get("lang") or row["id"].split("-")[0] for row in rows}
    return str(path), languages | {"code": "en", "numbers": "en"}


def test_a_mixed_corpus_into_two_targets_by_two_artifacts(tmp_path, services, demo_artifact, artifacts, workers):
    """Into Chinese by the demo EN->ZH model: English translated, Chinese copied, every other language skipped
    naming it; into German by a many-to-many M2M100: every document translated from its own language, German
    ones copied. Each document is two rows, each translated by its target's artifact, loaded by the worker."""
    inputs, languages = _corpus(tmp_path)
    m2m100 = str(artifacts["m2m100_418M"])
    body = {
        "name": "mixed", "inputs": [inputs], "output": services["output"], "chunk_documents": 5,
        "artifacts": {"en-zh": str(demo_artifact), "*-de": m2m100}, "language_column": "lang",
        "options": {"max_new_tokens": 40},
    }  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(body))
    submitted = jobs_cli("submit", str(tmp_path / "spec.json"), env=services["env"])
    assert submitted.returncode == 0, submitted.stderr
    job_id = submitted.stdout.strip()
    workers()
    status = wait(job_id, services)
    documents = len(languages)
    assert (status["state"], status["documents"], status["chunks"]) == ("succeeded", 2 * documents, 8)

    rows = output_rows(services["output"], job_id)
    each_once = {(i, t): 1 for i in languages for t in ("zh", "de")}
    assert Counter((r["id"], r["target_language"]) for r in rows) == each_once
    found = {(r["id"], r["target_language"]): r for r in rows}
    for target in ("zh", "de"):
        assert {i: found[i, target]["source_language"] for i in languages} == languages  # found, or as the row says
    into_zh = {i: found[i, "zh"] for i in languages}
    read = {i for i, language in languages.items() if language in ("en", "zh")}
    assert {i for i, r in into_zh.items() if r["status"] != "skipped"} == read  # not one other language translated
    assert {into_zh[i]["status"] for i in read - {"code", "numbers"}} == {"ok"}  # code, numbers: partial or ok
    assert {i for i, r in into_zh.items() if "already_target" in r["document_flags"]} == {"zh-0", "zh-1"}
    assert {i for i, r in into_zh.items() if "language_fallback" in r["document_flags"]} == {"code", "numbers"}
    assert all(r["translation"] == "" and "which this artifact does not read" in r["error"]
               for r in into_zh.values() if r["status"] == "skipped")  # fmt: skip
    assert into_zh["en-5"]["translation"] == "汤姆有7个苹果。会议上午9点开始。"
    assert "French (fr)" in into_zh["said-fr"]["error"]
    into_de = {i: found[i, "de"] for i in languages}
    assert all(r["status"] in ("ok", "partial") and r["translation"] for r in into_de.values())  # M2M100 reads all
    assert {i for i, r in into_de.items() if "already_target" in r["document_flags"]} == {"de-0", "de-1"}
    ids = {r["target_language"]: r["artifact_id"] for r in rows}
    assert ids["de"].startswith("m2m100") and not ids["zh"].startswith("m2m100")

    summary = json.loads(open_storage(services["output"]).read(f"{job_id}/_SUCCESS"))
    skipped = documents - len(read)
    assert summary["targets"]["zh"]["skipped"] == skipped and summary["targets"]["de"]["skipped"] == 0
    assert all(sum(summary["targets"][t].values()) == documents for t in ("zh", "de"))
    assert summary["languages"] == {code: 2 * n for code, n in Counter(languages.values()).most_common()}
    assert summary["routes"]["skipped"] == skipped and summary["routes"]["already_target"] == 4
    assert summary["routes"]["language_fallback"] == 4  # code and numbers, into each target
    report = jobs_cli("status", job_id, "--output", services["output"], env=services["env"]).stdout
    assert f"languages: en {2 * Counter(languages.values())['en']}, " in report
    assert f"into zh: {documents} rows (ok " in report


def test_a_pair_without_an_artifact_is_refused_naming_it(tmp_path, services, demo_artifact):
    inputs, _ = _corpus(tmp_path)
    body = {
        "name": "lacking", "inputs": [inputs], "output": services["output"],
        "artifacts": {"en-zh": str(demo_artifact)}, "target_languages": ["zh", "ja"],
    }  # fmt: skip
    (tmp_path / "spec.json").write_text(json.dumps(body))
    refused = jobs_cli("submit", str(tmp_path / "spec.json"), env=services["env"])
    assert refused.returncode == 1
    assert "no artifact translates into ja: add *-ja: PATH under artifacts" in refused.stderr
    body["artifacts"] = {"en-zh": str(demo_artifact), "en-ja": str(demo_artifact)}  # the demo writes Chinese only
    (tmp_path / "spec.json").write_text(json.dumps(body))
    refused = jobs_cli("submit", str(tmp_path / "spec.json"), env=services["env"])
    assert refused.returncode == 1 and "translates into zh only, not ja" in refused.stderr
    assert open_storage(services["output"]).list("") == []
