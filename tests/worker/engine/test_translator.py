"""Translator facade and CLI on tiny artifacts."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from pathlib import Path
from typing import Any

import numpy as np
import onnxruntime as ort
import pytest

from worker.engine import sessions
from worker.engine.artifact import Artifact
from worker.engine.inference import pad_batch
from worker.engine.search import DecodingOptions
from worker.engine.translation import Translation
from worker.engine.translator import Translator


def test_empty_and_whitespace_sentences_translate_to_empty_without_a_model_call(artifacts, monkeypatch) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    model_calls: list[int] = []  # sources per call of the model
    real = translator.generate_ids
    monkeypatch.setattr(translator, "generate_ids", lambda ids, *a: model_calls.append(len(ids)) or real(ids, *a))
    out = translator.translate_batch(["", "   ", "Tom has 3 apples."], translator.options(beam_size=2))
    assert [t.text for t in out[:2]] == ["", ""]
    assert out[2].tokens and model_calls == [1]  # only the sentence with words reached the model
    assert translator.translate_batch([" ", "\t"]) == [Translation("", [], 0.0)] * 2 and model_calls == [1]


def test_non_strings_are_refused_with_what_was_passed(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    with pytest.raises(TypeError, match="got int"):
        translator.translate_batch(["fine", 42])  # type: ignore[list-item]


def test_a_many_to_many_model_forces_the_target_language_named(artifacts) -> None:
    translator = Translator(artifacts["m2m100_418M"], precision="fp32")
    for code, token in (("fr", 128028), ("zh", 128102)):
        options = translator.options(beam_size=1, max_new_tokens=4, source_language="de", target_language=code)
        (out,) = translator.translate_batch(["Tom has 3 apples."], options)
        assert out.tokens[0] == token
    assert translator.tokenizer.encode("Tom", translator.framing(options))[0] == 128020  # __de__ leads the source


def test_a_many_to_many_model_with_no_target_named_is_refused_with_its_codes(artifacts) -> None:
    translator = Translator(artifacts["nllb-200-distilled-600M"], precision="fp32")
    with pytest.raises(ValueError, match="name a target language.*zho_Hans"):
        translator.translate_batch(["x"], translator.options())
    with pytest.raises(ValueError, match="target language 'zh' is not one of this model's 202 languages.*zho_Hant"):
        translator.translate_batch(["x"], translator.options(target_language="zh"))
    with pytest.raises(ValueError, match="source language 'english'"):
        translator.translate_batch(["x"], translator.options(source_language="english", target_language="zho_Hans"))


def test_a_multilingual_marian_puts_the_target_token_first_in_the_source(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-tc-big-en-zle"], precision="fp32")
    framing = translator.framing(translator.options(target_language="ukr"))
    assert translator.tokenizer.encode("Tom", framing)[0] == translator.tokenizer.language_ids["ukr"] == 4
    assert translator.tokenizer.encode("Tom")[-1] == 25539 and translator.tokenizer.encode("Tom")[0] != 4
    with pytest.raises(ValueError, match="drop the source language"):
        translator.translate_batch(["x"], translator.options(source_language="en"))


def test_t5_languages_pick_the_task_its_prefix_and_its_settings(artifacts) -> None:
    translator = Translator(artifacts["t5-small"], precision="fp32")
    options = translator.options(source_language="en", target_language="fr")
    assert (options.beam_size, options.max_new_tokens, options.early_stopping) == (4, 299, True)  # the task's
    assert translator.framing(options).text_prefix == "translate English to French: "
    own = translator.framing(translator.options(target_language="fr", source_prefix="translate to French: "))
    assert own.text_prefix == "translate to French: "
    assert translator.framing(translator.options(target_language="de")).text_prefix.endswith("German: ")
    with pytest.raises(ValueError, match="en -> de, en -> fr, en -> ro"):
        translator.options(source_language="en", target_language="zh")


def test_a_one_pair_model_refuses_languages(artifacts, demo_artifact) -> None:
    opus = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    assert opus.tokenizer.encode("x", opus.framing(opus.options(target_language="cmn_Hans")))[0] == 5  # >>cmn_Hans<<
    demo = Translator(demo_artifact)  # a Marian model without >>lang<< tokens
    with pytest.raises(ValueError, match="one fixed language"):
        demo.translate_batch(["x"], demo.options(target_language="cmn_Hans"))


@pytest.fixture(scope="module")
def short_model(tmp_path_factory, model_seed) -> Path:
    """An opus-mt-en-zh-like artifact with 128 positions: its decoder holds 128 tokens at most."""
    from export_tools.build import build
    from export_tools.fixtures.like import build_like

    root = tmp_path_factory.mktemp("short")
    source = build_like("opus-mt-en-zh", root / "model", seed=model_seed, positions=128)
    build(str(source), root / "artifact", ["fp32"])
    return root / "artifact"


def test_a_length_limit_past_the_positions_is_clamped_and_flagged(short_model: Path) -> None:
    result = subprocess.run(
        [sys.executable, "-m", "worker", "translate", "--artifact", str(short_model), "--jsonl",
         "--beam", "1", "--max-new-tokens", "400"],
        input="Tom has 3 apples.\nThe meeting starts at 9 am.\n\n", capture_output=True, text=True,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    for row in rows[:2]:
        assert len(row["tokens"]) <= 128
        assert ("length_limit" in row["flags"]) == (len(row["tokens"]) == 128), row
    assert any("length_limit" in row["flags"] for row in rows)  # random weights rarely stop on their own


def test_min_new_tokens_past_the_positions_is_clamped_too(short_model: Path) -> None:
    translator = Translator(short_model)
    options = translator.options(beam_size=2, min_new_tokens=300, max_new_tokens=400)
    (out,) = translator.translate_batch(["Tom has 3 apples."], options)
    assert len(out.tokens) == 128 and "length_limit" in out.flags


@pytest.mark.parametrize(
    ("options", "message"),
    [
        (dict(beam_size=0), "beam_size must be >= 1, got 0"),
        (dict(beam_size=2, num_hypotheses=3), r"num_hypotheses must be between 1 and beam_size \(2\), got 3"),
        (dict(min_new_tokens=9, max_new_tokens=4), r"min_new_tokens must be between 0 and max_new_tokens \(4\)"),
        (dict(early_stopping="sometimes"), "early_stopping must be true, false or 'never', got 'sometimes'"),
    ],
)
def test_contradictory_options_are_refused_saying_which(options, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        DecodingOptions(**options)


def test_unknown_options_are_refused_naming_the_valid_ones() -> None:
    with pytest.raises(ValueError, match="unknown decoding options.*beam_size"):
        DecodingOptions.from_generation_config({}, beams=4)


def test_cli_translates_stdin_lines_as_json(artifacts) -> None:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "worker",
            "translate",
            "--artifact",
            str(artifacts["opus-mt-en-zh"]),
            "--jsonl",
            "--beam",
            "2",
        ],
        input="Tom has 3 apples.\n\nThe meeting starts at 9 am.\n",
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr
    rows = [json.loads(line) for line in result.stdout.splitlines()]
    assert [r["line"] for r in rows] == [1, 2, 3]
    assert rows[1]["translation"] == "" and rows[0]["tokens"]


def test_batches_across_sessions_come_back_in_input_order(artifacts) -> None:
    from export_tools.verify import sample_sentences

    sentences = sample_sentences() * 3
    one = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    pooled = Translator(artifacts["opus-mt-en-zh"], precision="fp32", threads=2, sessions=2, max_tokens=300)
    options = one.options(beam_size=2, max_new_tokens=12)
    assert [t.tokens for t in pooled.translate_batch(sentences, options)] == [
        t.tokens for t in one.translate_batch(sentences, options)
    ]


def test_input_longer_than_the_positions_is_cut_and_flagged(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    long_text = " ".join(["Tom has 3 apples."] * 120)
    out = translator.translate_batch([long_text], translator.options(beam_size=1, max_new_tokens=4))
    assert "truncated_input" in out[0].flags and "length_limit" in out[0].flags


def test_max_length_ratio_caps_new_tokens(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    out = translator.translate_batch(["Tom"], translator.options(beam_size=1, min_new_tokens=0, max_length_ratio=1.0))
    assert len(out[0].tokens) <= len(translator.tokenizer.encode("Tom"))


def test_blank_input_never_touches_the_model(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    assert [t.text for t in translator.translate_batch(["", " \n\t "])] == ["", ""]
    assert translator.pool._pid is None  # no session was ever created


def test_sessions_are_created_after_fork_in_the_child(artifacts) -> None:
    import multiprocessing

    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    assert translator.pool._pid is None  # building a Translator creates no session in the parent
    expected = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))[0].tokens
    context = multiprocessing.get_context("fork")  # what Celery's prefork pool does: the child inherits it
    results = context.Queue()
    process = context.Process(target=_translate_in_child, args=(translator, results))
    process.start()
    child = results.get(timeout=60)
    process.join(timeout=60)
    assert child["tokens"] == expected
    assert child["pid"] != translator.pool._pid and child["pool_pid"] == child["pid"]


def _translate_in_child(translator: Translator, results) -> None:
    import os

    tokens = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))[0].tokens
    results.put({"tokens": tokens, "pid": os.getpid(), "pool_pid": translator.pool._pid})


def test_a_pair_a_caller_drives_runs_no_batch_until_it_lets_go(artifacts) -> None:
    """Verification drives steps on a session pair it holds (``pool.acquire``): with one pair, a batch
    (and the memory's ``identity``, which reads the pair's provider) waits until the caller lets go."""
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32", sessions=1)
    expected = translator.translate_batch(["Tom has 3 apples."])[0]
    done: list[object] = []
    batch = threading.Thread(target=lambda: done.append(translator.translate_batch(["Tom has 3 apples."])[0]))
    identity = threading.Thread(target=lambda: done.append(translator.identity))
    with translator.pool.acquire() as inference:
        batch.start()
        identity.start()
        batch.join(timeout=1)
        identity.join(timeout=0.2)
        assert batch.is_alive() and identity.is_alive() and not done  # both wait for the one pair
        ids, mask = pad_batch([translator.tokenizer.encode("A cat.")], translator.pad_id)
        assert inference.encode(ids, mask).cross  # the holder's alone meanwhile
    batch.join(timeout=60)
    identity.join(timeout=60)
    assert expected in done and (translator.artifact.artifact_id, "fp32", "CPUExecutionProvider") in done


def test_several_hypotheses_come_back_best_first_with_their_text(artifacts) -> None:
    translator = Translator(artifacts["opus-mt-en-zh"], precision="fp32")
    (out,) = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=4, num_hypotheses=3))
    assert len(out.hypotheses) == 3
    assert out.hypotheses[0].text == out.text and out.hypotheses[0].tokens == out.tokens
    scores = [h.score for h in out.hypotheses]
    assert scores == sorted(scores, reverse=True)


def test_cuda_without_the_cuda_provider_logs_and_runs_on_cpu(artifacts, caplog) -> None:
    import onnxruntime

    if "CUDAExecutionProvider" in onnxruntime.get_available_providers():
        pytest.skip("this machine has CUDA: the fallback cannot happen")
    translator = Translator(artifacts["opus-mt-en-zh"], device="cuda", precision="fp32")
    with caplog.at_level("WARNING"):
        out = translator.translate_batch(["Tom has 3 apples."], translator.options(beam_size=2))
    assert out[0].tokens
    assert "no CUDAExecutionProvider" in caplog.text and "running on CPU" in caplog.text


def test_both_sessions_read_the_one_mapping_of_the_weights_they_share(artifacts, monkeypatch) -> None:
    """The tensors the manifest lists as shared (here the positions) reach the encoder and the decoder as
    one OrtValue over weights.bin's own mapped bytes (no copy of them), and each session computes with
    it: replaced by zeros for one graph only, that graph's output changes."""
    artifact = Artifact.load(artifacts["opus-mt-en-zh"])
    (entry,) = artifact.shared_weights("fp32")
    assert set(entry["names"]) == {"encoder", "decoder"}
    (name,) = entry["names"]["encoder"]
    handed: dict[str, dict[str, Any]] = {}  # per graph: the initializers its session was made with
    zeroed: dict[str, Any] = {}  # per graph: what replaces the shared value (this test's own zeros)
    make_session = sessions.make_session

    def recording(path: Path, **kwargs: Any) -> Any:
        handed[path.stem] = dict(kwargs.get("initializers") or {})
        if path.stem in zeroed:
            kwargs["initializers"] = {**handed[path.stem], name: zeroed[path.stem]}
        return make_session(path, **kwargs)

    monkeypatch.setattr(sessions, "make_session", recording)  # what SessionPool calls; numpy is untouched

    def outputs() -> tuple[list[np.ndarray], np.ndarray]:
        """The encoder's cross-attention K/V and the decoder's first logits for one sentence."""
        translator = Translator(artifact, precision="fp32", io_binding=False)
        ids, mask = pad_batch([translator.tokenizer.encode("Tom has 3 apples.")], translator.pad_id)
        with translator.pool.acquire() as inference:
            state = inference.encode(ids, mask)
            start = np.full((1, 1), translator.vocab.decoder_start)
            return state.cross, inference.step(start, state, inference.empty_past(1)).values

    cross, logits = outputs()
    value = handed["encoder"][name]
    assert handed["decoder"][name] is value  # one OrtValue for both graphs
    assert _file_offset(value.data_ptr(), artifact.weights("fp32")) == entry["offset"]  # the file's own bytes
    zeroed["encoder"] = ort.OrtValue.ortvalue_from_numpy(np.zeros(entry["shape"], entry["dtype"]))
    zeroed_cross, _ = outputs()
    assert not all(np.array_equal(a, b) for a, b in zip(zeroed_cross, cross))
    zeroed["decoder"] = zeroed.pop("encoder")
    same_cross, zeroed_logits = outputs()
    assert all(np.array_equal(a, b) for a, b in zip(same_cross, cross))  # the encoder as before...
    assert not np.array_equal(zeroed_logits, logits)  # ...and the decoder's positions were the zeros


def _file_offset(address: int, path: Path) -> int | None:
    """Which byte of ``path`` lies at ``address`` in this process, if a mapping of ``path`` covers it."""
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == str(path.resolve()):
            low, high = (int(x, 16) for x in fields[0].split("-"))
            if low <= address < high:
                return int(fields[2], 16) + address - low
    return None


@pytest.mark.parametrize("precision", ["int8", "fp32"])
def test_no_mapping_of_the_process_covers_the_token_table(artifacts, precision: str) -> None:
    """The worker reads the rows it looks up (``TokenRows``): a mapping of the table, a lookup's or one
    handed to the sessions, made all of it resident within a few sentences (32 MiB of the INT8 peak;
    BENCHMARKS.md). The tied LM head's mapping is gone once ONNX Runtime has folded and prepacked it."""
    translator = Translator(artifacts["opus-mt-en-zh"], precision=precision)
    assert translator.translate_batch(["Tom has 3 apples.", "A cat sat on the mat."])[1].tokens
    table = translator.artifact.token_table(precision)
    weights = str(translator.artifact.weights(precision).resolve())
    start, end = table["offset"], table["offset"] + table["length"]
    mapped = []  # (first, last byte) of weights.bin in each mapping of this process
    for line in Path("/proc/self/maps").read_text().splitlines():
        fields = line.split(maxsplit=5)
        if len(fields) == 6 and fields[5] == weights:
            low, high = (int(x, 16) for x in fields[0].split("-"))
            mapped.append((int(fields[2], 16), int(fields[2], 16) + high - low))
    assert mapped, "the sessions map the rest of weights.bin: expected some mapping of it"
    assert not [(a, b) for a, b in mapped if a < end and start < b], (mapped, (start, end))


def test_a_sentence_with_phrases_is_remembered_apart_from_the_same_sentence_without(demo_artifact) -> None:
    """The memory keys a request by its text and the phrases its translation must hold: the constrained
    translation is reused for the same request, and never given for the sentence asked without them."""
    from worker.engine.memory import LocalMemory

    translator, memory = Translator(demo_artifact), LocalMemory()
    text = "New York is 4,661 kilometers from Chicago."
    plain, forced = translator.translate_batch([text, text], memory=memory, phrases=[[], ["芝加哥市"]])
    assert "芝加哥市" in forced.text and "芝加哥市" not in plain.text and not (plain.reused or forced.reused)
    again = translator.translate_batch([text, text, text], memory=memory, phrases=[["芝加哥市"], [], ["芝加哥市"]])
    assert [t.text for t in again] == [forced.text, plain.text, forced.text]
    assert all(t.reused for t in again) and len(memory._entries) == 2
