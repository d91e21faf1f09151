"""Two fine-tuning tasks in GLUE's layout made offline from the built-in corpus, for the suite.

``python -m features.finetune.glue_local OUT_DIR`` writes ``topic`` (the built-in task's
paragraphs and topics, as SST-2 is laid out) and ``overlap`` (a regression on pairs of
paragraphs, scored by their shared words, as STS-B is laid out) (README.md, "The suite on
local files from the built-in corpus"), and prints the suite's command line."""

from __future__ import annotations

import argparse
import json
import re
from pathlib import Path

import numpy as np

from features.finetune.labelled import builtin_examples

WORDS = 16  # each text of a pair: both fit 64 tokens together
PAIRS = 1000
SEED = 0
_WORD = re.compile(r"[a-z0-9_]+")


def overlap(a: str, b: str) -> float:
    """5 x the Jaccard overlap of the two texts' sets of lower-cased words."""
    x, y = set(_WORD.findall(a.lower())), set(_WORD.findall(b.lower()))
    return 5 * len(x & y) / len(x | y) if x | y else 0.0


def topic_rows() -> list[dict]:
    return [{"sentence": text, "label": topic} for text, _, topic in builtin_examples()]


def overlap_rows(rng: np.random.Generator) -> list[dict]:
    paragraphs = [(" ".join(text.split()[:WORDS]), topic) for text, _, topic in builtin_examples()]
    by_topic: dict[str, list[int]] = {}
    for i, (_, topic) in enumerate(paragraphs):
        by_topic.setdefault(topic, []).append(i)
    rows = []
    for n in range(PAIRS):
        a = int(rng.integers(len(paragraphs)))
        pool = by_topic[paragraphs[a][1]] if n % 2 == 0 else range(len(paragraphs))
        b = int(rng.choice([i for i in pool if i != a]))
        first, second = paragraphs[a][0], paragraphs[b][0]
        rows.append({"sentence1": first, "sentence2": second, "label": overlap(first, second)})
    return rows


def write_folder(folder: Path, rows: list[dict], rng: np.random.Generator) -> None:
    """``rows`` shuffled into train.jsonl (80%) and validation.jsonl (20%)."""
    order = rng.permutation(len(rows))
    cut = int(0.8 * len(rows))
    folder.mkdir(parents=True, exist_ok=True)
    for name, ids in (("train", order[:cut]), ("validation", order[cut:])):
        text = "".join(json.dumps(rows[i]) + "\n" for i in sorted(ids))
        (folder / f"{name}.jsonl").write_text(text, encoding="utf-8")


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("out", type=Path, help="the folder to write the tasks' folders into")
    out = parser.parse_args().out.resolve()
    rng = np.random.default_rng(SEED)
    write_folder(out / "topic", topic_rows(), rng)
    write_folder(out / "overlap", overlap_rows(rng), rng)
    mapping = (
        f"{{topic: {out / 'topic'}, overlap: {{path: {out / 'overlap'}, problem: regression}}}}"
    )
    print(f"wrote {out / 'topic'} and {out / 'overlap'}; the suite:")
    print(
        f"python train.py mode=finetune ckpt_path=RUN finetune.task=files 'finetune.path={mapping}'"
    )


if __name__ == "__main__":
    main()
