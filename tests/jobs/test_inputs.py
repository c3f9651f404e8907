"""Reading a job's inputs: a row no tokenizer can read is an error row, its neighbours documents."""

from __future__ import annotations

import json

from jobs.inputs import Reader


def test_a_lone_surrogate_in_a_json_line_makes_that_row_an_error_row(tmp_path) -> None:
    rows = [
        {"id": "good", "text": "Tom has 3 apples."},
        {"id": "bad", "text": "Tom \ud800 has"},  # json.dumps writes the escape \ud800, which json.loads gives back
        {"id": "bad-id-\udc00", "text": "Happy birthday!"},
    ]
    path = tmp_path / "rows.jsonl"
    path.write_text("\n".join(json.dumps(r) for r in rows) + "\n", encoding="ascii")
    good, bad, bad_id = Reader(str(path), "id", "text").documents()
    assert (good.id, good.text, good.error) == ("good", "Tom has 3 apples.", None)
    assert (bad.id, bad.text) == ("bad", None)
    assert bad.error is not None and bad.error.startswith("rows.jsonl line 2: 'text': character 5 (near")
    assert "U+D800, a lone surrogate" in bad.error
    assert (bad_id.id, bad_id.text) == ("rows.jsonl:3", None)  # the place stands for an id that cannot be stored
    assert bad_id.error is not None and "line 3: 'id': character 8" in bad_id.error
