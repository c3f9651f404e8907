"""The translation memory (``worker/engine/memory.py``): reuse that is exact, keys that keep apart what differs,
backends that bound themselves and never fail a translation."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import redis

from export_tools.verify import sample_sentences
from tests.services import free_port
from worker.engine.memory import LocalMemory
from worker.engine.translation import Translation
from worker.engine.translator import Translator
from worker.runtime.memory import RedisMemory

ROOT = Path(__file__).resolve().parents[2]


def fresh(translation: Translation) -> Translation:
    return replace(translation, reused=False)


@pytest.mark.parametrize("precision", ["fp32", "int8", "int8-static"])
def test_reused_translations_are_what_a_fresh_translation_of_the_text_alone_gives(artifacts, precision) -> None:
    """Random weights, each precision: a text repeated within a call, and again in a later call, comes back
    bit for bit as the text translated alone; the engine sees each distinct text once."""
    translator = Translator(artifacts["opus-mt-en-zh"], precision=precision)
    a, b, c, d = sample_sentences()[:4]
    options = translator.options(beam_size=2, max_new_tokens=16)
    alone = {text: translator.translate_batch([text], options)[0] for text in (a, b, c, d)}
    seen: list[int] = []
    real = translator.generate_ids
    translator.generate_ids = lambda ids, *args: seen.append(len(ids)) or real(ids, *args)  # type: ignore[method-assign]
    memory = LocalMemory()

    first = translator.translate_batch([a, b, a, "", c, b, a], options, memory)
    assert sum(seen) == 3  # a, b and c, once each
    assert [fresh(t) for t in first] == [
        alone[a],
        alone[b],
        alone[a],
        Translation("", [], 0.0),
        alone[c],
        alone[b],
        alone[a],
    ]
    assert [t.reused for t in first] == [False, False, True, False, False, True, True]

    second = translator.translate_batch([d, c], options, memory)
    assert sum(seen) == 4 and [fresh(t) for t in second] == [alone[d], alone[c]]
    assert [t.reused for t in second] == [False, True] and second[1].source_tokens == alone[c].source_tokens > 0


def test_what_changes_the_output_keeps_entries_apart(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="int8")
    text = sample_sentences()[0]
    memory = LocalMemory()
    greedy = translator.options(beam_size=1, max_new_tokens=16)
    translator.translate_batch([text], greedy, memory)
    assert translator.translate_batch([text], greedy, memory)[0].reused
    for other in (
        translator.options(beam_size=2, max_new_tokens=16),  # another option
        translator.options(beam_size=1, max_new_tokens=16, target_language="cmn_Hant"),  # another language
    ):
        assert not translator.translate_batch([text], other, memory)[0].reused
    fp32 = Translator(artifacts["opus-mt-en-zh"], precision="fp32")  # the same artifact at another precision
    assert not fp32.translate_batch([text], greedy, memory)[0].reused
    # A length limit that is the batch's (max_length_ratio) is never remembered: it depends on the batch.
    ratio = translator.options(beam_size=1, max_new_tokens=16, max_length_ratio=1.5)
    for _ in range(2):
        assert not any(t.reused for t in translator.translate_batch([text, text], ratio, memory))


def test_local_memory_keeps_the_entries_used_last() -> None:
    memory = LocalMemory(capacity=2)
    memory.put({"a": "1", "b": "2"})
    assert memory.get(["a"]) == ["1"]  # a is now the last used
    memory.put({"c": "3"})
    assert memory.get(["a", "b", "c"]) == ["1", None, "3"]


def test_redis_memory_expires_stops_at_its_cap_and_clears_by_output(redis_url, monkeypatch) -> None:
    from contract import cache, settings

    monkeypatch.setattr(settings, "CACHE_URL", redis_url)
    cache.cache.cache_clear()

    client = redis.Redis.from_url(redis_url)
    output = "s3://bucket/results[1]*"  # glob characters in the prefix must not clear other prefixes
    namespace = cache.memory_namespace(output, "job-1", "job")
    shared = cache.memory_namespace(output, "job-1", "shared")
    other = cache.memory_namespace("s3://bucket/results1x", "job-2", "job")  # what the glob unescaped matches
    assert cache.memory_namespace(output, "job-1", "off") is None
    client.delete(namespace, shared, other)
    memory = RedisMemory(client, namespace, ttl=60, capacity=2)
    memory.put({"a": "1"})
    memory.put({"b": "2"})
    memory.put({"c": "3"})  # the cap was reached: not kept
    assert memory.get(["a", "b", "c"]) == ["1", "2", None]
    assert 0 < client.ttl(namespace) <= 60
    RedisMemory(client, shared, ttl=60, capacity=9).put({"s": "1"})
    RedisMemory(client, other, ttl=60, capacity=9).put({"o": "1"})
    assert cache.clear_memory(output, "job-1") == {f"{output}|job-1": 2}
    assert cache.clear_memory(output + "/") == {f"{output}|shared": 1}
    assert client.exists(namespace, shared) == 0 and client.hlen(other) == 1
    client.delete(other)
    cache.cache.cache_clear()


def test_a_memory_whose_redis_is_gone_translates_all_the_same(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="int8")
    gone = RedisMemory(redis.Redis(port=free_port(), socket_connect_timeout=1), "fanyi:memory:x|y", ttl=60, capacity=9)
    text = sample_sentences()[1]
    options = translator.options(beam_size=1, max_new_tokens=16)
    out = translator.translate_batch([text, text], options, gone)
    assert [fresh(t) for t in out] == [translator.translate_batch([text], options)[0]] * 2
    assert gone.failed  # and the rest of its chunk does not wait for that Redis again


def test_an_entry_that_cannot_be_read_is_a_miss(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="int8")
    text = sample_sentences()[2]
    options = translator.options(beam_size=1, max_new_tokens=16)
    memory = LocalMemory()
    translator.translate_batch([text], options, memory)
    for damaged in ("{not json", '{"h": [], "flags": [], "source_tokens": 3}', '{"flags": []}'):
        memory.put(dict.fromkeys(memory._entries, damaged))  # an older format, or a damaged write
        (out,) = translator.translate_batch([text], options, memory)
        assert not out.reused and out == translator.translate_batch([text], options)[0]


def test_the_cli_with_memory_prints_what_it_prints_without_and_counts_the_reuse(demo_artifact, tmp_path) -> None:
    """Issue 16's corpus: 120 documents, 60 of them copies of the others, every one closing with one footer."""
    originals = [json.loads(line) for line in (ROOT / "examples" / "corpus.jsonl").read_text().splitlines()][:60]
    footer = "\n\nThe office opens at 9 am on Monday. Welcome to our store."
    documents = [{"id": d["id"], "text": d["text"] + footer} for d in originals]
    documents += [{"id": f"copy-{d['id']}", "text": d["text"] + footer} for d in originals]
    corpus = "".join(json.dumps(d, ensure_ascii=False) + "\n" for d in documents)
    command = [sys.executable, "-m", "worker", "translate", "--artifact", str(demo_artifact), "--documents"]
    runs = []
    for extra in ([], ["--memory"]):
        result = subprocess.run([*command, *extra], input=corpus, capture_output=True, text=True, check=True)
        runs.append([json.loads(line) for line in result.stdout.splitlines()])
    without, with_memory = runs
    strip = lambda row: {k: v for k, v in row.items() if k not in ("timings", "reused_windows", "reused_tokens")}
    assert [strip(r) for r in with_memory] == [strip(r) for r in without]
    assert all(r["reused_windows"] == 0 for r in without)
    assert all(r["reused_windows"] > 0 for r in with_memory[60:])  # every copy
    assert all(r["reused_windows"] == r["windows"] for r in with_memory[60:])  # seen whole before
    assert with_memory[1]["reused_windows"] > 0  # the footer, seen in the first document
