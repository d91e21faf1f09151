"""The fine-tuning guide's commands in the docs test (tests/docs_lists.py merges these)."""

import json
from pathlib import Path

from features.finetune.labelled import builtin_examples
from tests.docs_lists import MEASUREMENT, NETWORK


def write_inputs(ws: Path, paragraphs: list[str]) -> None:
    """The guide's files: two classes for finetune.task=files (a paragraph's first 80
    characters, and its length), and paragraphs labelled with the built-in task's topics,
    what a fine-tune on it scores."""
    labelled = ["sentence,label"] + [
        '"{}",{}'.format(
            " ".join(p[:80].replace('"', "").split()), "long" * (len(p) > 200) or "short"
        )
        for p in paragraphs[:60]
    ]
    (ws / "labelled.csv").write_text("\n".join(labelled) + "\n")
    topics_rows = [{"text": t, "label": label} for t, _, label in builtin_examples()[::25]]
    (ws / "topics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in topics_rows))


PLACEHOLDERS = {"FT_RUN": r"runs/2026-01-01/\d\d-\d\d-\d\d"}
PRODUCERS = {"FT_RUN": "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt"}
# mode=finetune runs two steps: an epoch of the built-in task at this batch size, so it
# validates and writes the checkpoints/best.ckpt that mode=eval ckpt_path=$FT_RUN reads.
MODE_ARGS = {"mode=finetune": ["finetune.max_steps=2", "finetune.batch_size=512"]}
NOT_RUNNABLE = {
    "python -m features.finetune.bench --gpt runs/gpt --bert runs/bert finetune.max_seq_len=64": (
        "too long: 12 fine-tunes of the default GPT and BERT (5 epochs each, ~1 h here); each "
        "is a mode=finetune run, as above"
    ),
    # the pretraining sweeps that pretrained against scratch starts from
    "python train.py -m seed=1,2,3 hydra.sweep.dir=runs/gpt": MEASUREMENT,
    "python train.py -m model=bert seed=1,2,3 hydra.sweep.dir=runs/bert": MEASUREMENT,
    "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
    "finetune.task=mrpc": NETWORK,
    "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
    "finetune.task=stsb": NETWORK,
    "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
    "finetune.task=glue": NETWORK,
    "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt finetune.task=files "
    "'finetune.path={topic: glue_local/topic, overlap: {path: glue_local/overlap, problem: "
    "regression}}'": (
        "reads the folders python -m features.finetune.glue_local writes, and the docs' "
        "commands run in no fixed order; composed only: tests/features/finetune/"
        "test_finetune_suite.py runs a two-task suite of such "
        "folders end to end"
    ),
    **dict.fromkeys(
        [
            "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
            "finetune.task=files 'finetune.path={topic: glue_local/topic, overlap: {path: "
            "glue_local/overlap, problem: regression}}' finetune.max_seq_len=64 seed=1",
            "python train.py mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
            "finetune.task=files 'finetune.path={topic: glue_local/topic, overlap: {path: "
            "glue_local/overlap, problem: regression}}' finetune.max_seq_len=64 seed=1 "
            "finetune.init=scratch",
        ],
        "the measured suite (~8 min each here); composed only: it is the suite above with the "
        "protocol's keys, which tests/features/finetune/test_finetune_suite.py runs end to end",
    ),
    "python train.py -m mode=finetune ckpt_path=$BERT_RUN/checkpoints/best.ckpt "
    "finetune.init=pretrained,scratch seed=1,2,3": (
        "six fine-tunes, ~20 s even at two steps each; composed only: each of its jobs is a "
        "fine-tune as above, and the sweep summary reads their metrics.json like any job's"
    ),
    **dict.fromkeys(
        [
            "python train.py mode=finetune ckpt_path=$SWEEP",
            "python train.py mode=finetune ckpt_path=$SWEEP finetune.init=scratch",
        ],
        "fine-tunes the 12 jobs of the docs' sweep, ~40 s even at two steps each; "
        "tests/features/finetune/test_finetune.py fine-tunes and groups a sweep of 5 jobs",
    ),
}
QUICK = {"python -m features.finetune.glue_local glue_local": ["glue_local"]}
PROMISES = {"python train.py mode=eval ckpt_path=$FT_RUN": ["$FT_RUN/eval.jsonl"]}
