"""The minimal pairs guide's commands in the docs test (tests/docs_lists.py merges these)."""

import json
from pathlib import Path

from tests.docs_lists import NETWORK


def write_inputs(ws: Path, paragraphs: list[str]) -> None:
    """The guide's files: one pair, and what the docs' git clone of BLiMP makes: 2 paradigms."""
    pair = {"sentence_good": "The value is returned.", "sentence_bad": "The value are returned."}
    (ws / "pairs.jsonl").write_text(json.dumps(pair) + "\n")
    (ws / "blimp" / "data").mkdir(parents=True)
    for uid in ("agreement", "order"):
        (ws / "blimp" / "data" / f"{uid}.jsonl").write_text(json.dumps({**pair, "UID": uid}))


NOT_RUNNABLE = {
    "git clone https://github.com/alexwarstadt/blimp": NETWORK + "; write_inputs stands in",
}
