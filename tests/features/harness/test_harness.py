"""``mode=harness harness.tasks=TASKS``: lm-evaluation-harness tasks on a decoder checkpoint.

Every task here is a local YAML over a jsonl file the test writes (offline). The harness's
loglikelihoods are recomputed from tinylm's own Decoder in float64 on a network with large
random weights (near-uniform logits would hide a wrong token or position), and its accuracy
from those loglikelihoods. The tests that run the harness's Hugging Face model need
``pip install -e ".[eval]"`` (CI installs it).
"""

from __future__ import annotations

import json
import math
import sys
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import features.harness.command
import modes
import modes.eval
from analysis.records import read_records
from analysis.summary import configuration_rows, group_runs
from conf.command_line import check_command_line
from conf.features import comma_lists, feature_groups
from conf.hydra_runtime import parse_settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.harness.config import HarnessConfig
from tests.conftest import compose_config
from training.checkpoint import load_checkpoint

TOLERANCE = 1e-6  # relative, of a float32 model's loglikelihood against float64 (seen: 8e-8)
# Contexts the harness treats apart: a plain one, an empty one (the prefix token: EOS), one
# with a trailing space (moved to the continuation before tokenizing).
DOCS = [
    {"context": "The return statement", "choices": ["leaves the function.", "is a fish."]},
    {"context": "", "choices": ["A loop runs again.", "Fish swim."]},
    {"context": "A list is ", "choices": ["mutable.", "a bird.", "x"]},
    {"context": "Strings are immutable sequences of", "choices": ["code points.", "chairs."]},
    {"context": "The import statement", "choices": ["finds a module.", "waters the garden."]},
]


AGGREGATE = "aggregate_metric_list: [{metric: acc, weight_by_size: true}]\n"  # of a group


def write_task(folder: Path, name: str, docs: list[dict] = DOCS, **fields: object) -> Path:
    """A multiple-choice task ``name`` over ``docs`` (answer: the first choice), as a YAML
    and a jsonl file in ``folder``; ``fields`` replace lines of the YAML."""
    folder.mkdir(parents=True, exist_ok=True)
    data = folder / f"{name}.jsonl"
    data.write_text("".join(json.dumps({**doc, "answer": 0}) + "\n" for doc in docs))
    lines = {
        "task": name,
        "dataset_path": "json",
        "dataset_kwargs": json.dumps({"data_files": {"test": str(data)}}),
        "test_split": "test",
        "output_type": "multiple_choice",
        "doc_to_text": "context",
        "doc_to_choice": "choices",
        "doc_to_target": "answer",
        "metric_list": "[{metric: acc}, {metric: acc_norm}]",
        "metadata": "{version: 2.0}",
        **fields,
    }
    (folder / f"{name}.yaml").write_text("".join(f"{k}: {v}\n" for k, v in lines.items()))
    return folder


def harness_settings(ckpt: Path, *overrides: str, mode: str = "harness"):
    """``mode=harness`` (or ``mode``) settings with ``overrides`` recorded as Hydra records a
    command line's (``compose`` records none)."""
    # output_dir: Hydra's run directory, which the harness never writes to
    cfg = compose_config(f"mode={mode}", f"ckpt_path={ckpt}", "output_dir=unused", *overrides)
    return replace(parse_settings(cfg), overrides=dict(o.split("=", 1) for o in overrides))


def evaluate(ckpt: Path, *overrides: str) -> dict:
    """``mode=harness``'s run with ``overrides`` recorded as a command line's."""
    return features.harness.command.run(harness_settings(ckpt, *overrides))


def randomised(loaded):
    """The checkpoint's network with every weight drawn from N(0, 0.5)."""
    generator = torch.Generator().manual_seed(0)
    with torch.no_grad():
        for param in loaded.model.parameters():
            param.copy_(torch.randn(param.shape, generator=generator) * 0.5)
    return loaded


def tinylm_loglikelihood(model, tokenizer, context: str, continuation: str) -> float:
    """log P(continuation | context) from tinylm's Decoder in float64, the request split as
    the harness splits it: trailing spaces of the context go to the continuation, the whole
    is tokenized and the context's tokens cut off; an empty context is the EOS token."""
    spaces = len(context) - len(context.rstrip())
    if spaces:
        context, continuation = context[:-spaces], context[-spaces:] + continuation
    eos = special_tokens_of(tokenizer).eos_id
    if context:
        whole = tokenizer.encode(context + continuation).ids
        context_ids = tokenizer.encode(context).ids
        continuation_ids = whole[len(context_ids) :]
    else:
        context_ids, continuation_ids = [eos], tokenizer.encode(continuation).ids
    ids = torch.tensor([context_ids + continuation_ids])  # (1, T)
    with torch.no_grad():
        logits = model(ids[:, :-1])  # (1, T-1, V)
    logprobs = torch.log_softmax(logits, dim=-1)[0]  # (T-1, V)
    targets = ids[0, len(context_ids) :]  # (C,)
    positions = torch.arange(len(context_ids) - 1, ids.shape[1] - 1)  # (C,)
    return float(logprobs[positions, targets].sum())


@pytest.mark.parametrize("batch_size", [1, 16])
def test_loglikelihoods_are_tinylms_and_the_accuracy_recounts_them(
    tiny_checkpoints, tmp_path, batch_size
) -> None:
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    from features.harness.runner import harness_model, metric_rows, run_harness, task_manager

    tasks = write_task(tmp_path / "tasks", "choice")
    cfg = HarnessConfig(tasks="choice", include=str(tasks), batch_size=batch_size)
    loaded = randomised(load_checkpoint(tiny_checkpoints["decoder"]))
    tokenizer = tokenizer_from_json(loaded.hparams["tokenizer_json"])
    assert harness_model(loaded, batch_size).prefix_token_id == special_tokens_of(tokenizer).eos_id
    manager, names = task_manager(cfg.tasks, cfg.include)
    results = run_harness(loaded, manager, names, cfg, log_samples=True)
    samples = sorted(results["samples"]["choice"], key=lambda s: s["doc_id"])
    assert [s["doc"]["context"] for s in samples] == [d["context"] for d in DOCS]
    exact = loaded.model.double()  # after the harness has made its float32 copy
    correct, correct_norm = [], []
    for sample, doc in zip(samples, DOCS, strict=True):
        scored = [ll for ll, _greedy in sample["filtered_resps"]]
        expected = [
            tinylm_loglikelihood(exact, tokenizer, context, continuation)
            for context, continuation in sample["arguments"]
        ]
        assert [a[1] for a in sample["arguments"]] == [" " + c for c in doc["choices"]]
        for got, want in zip(scored, expected, strict=True):
            assert abs(got - want) <= TOLERANCE * max(1.0, abs(want)), (sample["arguments"], got)
        # The accuracies from tinylm's loglikelihoods, as the harness defines them.
        correct.append(max(range(len(expected)), key=expected.__getitem__) == 0)
        per_char = [ll / len(c) for ll, c in zip(expected, doc["choices"], strict=True)]
        correct_norm.append(max(range(len(per_char)), key=per_char.__getitem__) == 0)
    rows = {row["metric"]: row for row in metric_rows(results)}
    assert rows["acc"]["value"] == pytest.approx(sum(correct) / len(DOCS))
    assert rows["acc_norm"]["value"] == pytest.approx(sum(correct_norm) / len(DOCS))
    p = sum(correct) / len(DOCS)
    assert rows["acc"]["stderr"] == pytest.approx(math.sqrt(p * (1 - p) / (len(DOCS) - 1)))
    assert (rows["acc"]["n"], rows["acc"]["task_version"]) == (len(DOCS), 2.0)


def test_records_accumulate_and_a_rerun_replaces_its_own(tiny_checkpoints, tmp_path) -> None:
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    import lm_eval

    tasks = tmp_path / "tasks"
    write_task(tasks, "first")
    write_task(tasks, "second", DOCS[:3])
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"  # a copy: its eval.jsonl is ours
    ckpt.parent.mkdir(parents=True)
    ckpt.write_bytes(tiny_checkpoints["decoder"].read_bytes())
    records_file = ckpt.parent / "eval.jsonl"
    include = f"harness.include={tasks}"
    # mode=eval's own record, on the run's validation split
    plain = modes.eval.run(harness_settings(ckpt, mode="eval"))["results"]
    evaluate(ckpt, "harness.tasks=first", include)
    out = evaluate(ckpt, "harness.tasks=second", include)
    assert out["eval_jsonl"] == str(records_file)
    limited = evaluate(ckpt, "harness.tasks=first", include, "harness.limit=2")["results"]
    rerun = evaluate(ckpt, "harness.tasks=first", include)
    records = [r for _, r in read_records(records_file)]
    assert records[:1] == plain
    records = records[1:]
    assert [(r["task"], r["metric"], r["limit"]) for r in records] == [
        ("second", "acc", None),
        ("second", "acc_norm", None),
        ("first", "acc", 2.0),
        ("first", "acc_norm", 2.0),
        ("first", "acc", None),
        ("first", "acc_norm", None),
    ]
    assert records[2:4] == limited and (limited[0]["n"], limited[0]["n_total"]) == (2, len(DOCS))
    second = records[0]
    assert (second["n"], second["n_total"]) == (3, 3)
    assert second["harness"] == f"lm-eval {lm_eval.__version__}"
    assert (second["evaluation"], second["checkpoint"]) == ("harness", str(ckpt.resolve()))
    assert second["task_version"] == 2.0 and second["num_fewshot"] == 0
    assert records[4:] == rerun["results"]


def test_a_sweep_is_scored_job_by_job_and_summarised(tiny_checkpoints, tiny_ckpt, tmp_path):
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    sweep = tmp_path / "sweep"
    jobs = [(tiny_checkpoints["decoder"], "64", "1"), (tiny_checkpoints["decoder"], "64", "2")]
    jobs += [(tiny_ckpt, "32", "1"), (tiny_ckpt, "32", "2")]
    for number, (ckpt, width, seed) in enumerate(jobs):
        run_dir = sweep / str(number)
        (run_dir / "checkpoints").mkdir(parents=True)
        (run_dir / "checkpoints" / "best.ckpt").write_bytes(ckpt.read_bytes())
        overrides = {"model.max_seq_len": width, "seed": seed}
        (run_dir / "metrics.json").write_text(
            json.dumps({"status": "completed", "overrides": overrides})
        )
    tasks = write_task(tmp_path / "tasks", "choice")
    out = evaluate(sweep, "harness.tasks=choice", f"harness.include={tasks}")
    scored = [(Path(r["checkpoint"]).parent.parent.name, r["metric"]) for r in out["results"]]
    assert scored == [(str(n), m) for n in range(4) for m in ("acc", "acc_norm")]
    acc = {r["checkpoint"]: r["value"] for r in out["results"] if r["metric"] == "acc"}
    table = out["configurations"]
    assert "| model.max_seq_len | n | failed | choice acc | vs_best |" in table
    assert "| model.max_seq_len | n | failed | choice acc_norm | vs_best |" in table
    for width, first in (("64", 0), ("32", 2)):
        value = acc[str((sweep / str(first) / "checkpoints" / "best.ckpt").resolve())]
        assert f"| {width} | 2 | 0 | {value:.4f} ± 0.0000 |" in table
    assert json.loads((sweep / "eval.jsonl").read_text().splitlines()[0])["task"] == "choice"


def test_a_group_is_scored_with_its_tasks(tiny_checkpoints, tmp_path) -> None:
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    tasks = write_task(tmp_path / "tasks", "first")
    write_task(tasks, "second", DOCS[:3])
    (tasks / "both.yaml").write_text(f"group: both\ntask: [first, second]\n{AGGREGATE}")
    ckpt, include = tiny_checkpoints["decoder"], f"harness.include={tasks}"
    rows = evaluate(ckpt, "harness.tasks=both", include)["results"]
    acc = {r["task"]: r for r in rows if r["metric"] == "acc"}
    assert set(acc) == {"first", "second", "both"}
    assert (acc["both"]["n"], acc["both"]["n_total"]) == (len(DOCS) + 3, len(DOCS) + 3)
    weighted = (acc["first"]["value"] * len(DOCS) + acc["second"]["value"] * 3) / (len(DOCS) + 3)
    assert acc["both"]["value"] == pytest.approx(weighted)


def test_the_best_configuration_is_the_highest_where_higher_is_better() -> None:
    runs = [
        {"status": "completed", "overrides": {"lr": lr, "seed": s}, "acc": acc}
        for lr, s, acc in [("1", "1", 0.50), ("1", "2", 0.52), ("2", "1", 0.70), ("2", "2", 0.72)]
    ]
    accuracy = configuration_rows(group_runs(runs, ["lr"], "acc", higher_is_better=True), ())
    loss = configuration_rows(group_runs(runs, ["lr"], "acc"), ())
    assert [r["is_best"] for r in accuracy] == [False, True]
    assert accuracy[0]["vs_best"] == pytest.approx(-0.2) and accuracy[0]["exceeds_2se"] is True
    assert [r["is_best"] for r in loss] == [True, False]
    assert loss[1]["vs_best"] == pytest.approx(0.2) and loss[1]["exceeds_2se"] is True


def test_the_include_directory_alone_gives_what_the_whole_index_gives(
    tiny_checkpoints, tmp_path
) -> None:
    """The quick index (the directory's tasks alone) against the harness's whole one."""
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    from lm_eval.tasks import TaskManager

    from features.harness.runner import metric_rows, run_harness, task_manager

    tasks = write_task(tmp_path / "tasks", "choice")
    cfg = HarnessConfig(tasks="choice", include=str(tasks))
    loaded = load_checkpoint(tiny_checkpoints["decoder"])
    quick, names = task_manager(cfg.tasks, cfg.include)
    whole = TaskManager(include_path=str(tasks))
    assert len(quick.all_tasks) == 1 and len(whole.all_tasks) > 1000
    assert task_manager(["cho*"], str(tasks))[1] == ["choice"]  # a wildcard, as lm-eval's
    assert metric_rows(run_harness(loaded, quick, names, cfg)) == metric_rows(
        run_harness(loaded, whole, names, cfg)
    )


def test_task_lists_from_the_command_line() -> None:
    args = ["harness.tasks=a,b", "harness.tasks=[a,b]", "harness.tasks='a,b'", "prompt=a,b"]
    assert comma_lists(args) == [
        "harness.tasks=[a,b]",
        "harness.tasks=[a,b]",
        "harness.tasks='a,b'",
        "prompt=a,b",
    ]
    assert HarnessConfig(tasks="a, b,a").tasks == ["a", "b"]
    assert HarnessConfig(tasks=["a", "b"]).tasks == ["a", "b"]


def test_the_mode_is_the_features_and_the_old_command_names_it() -> None:
    assert modes.find("harness") is features.harness.command.run
    for old, new in [
        ("eval.harness=hellaswag,arc_easy", "mode=harness harness.tasks=TASKS"),
        ("eval.harness_limit=4", "harness.limit=N with mode=harness"),
    ]:
        with pytest.raises(ValueError) as err:
            check_command_line(["mode=eval", "ckpt_path=x", old])
        key = old.partition("=")[0]
        assert str(err.value).startswith(f"unknown key(s) {key} (retired: use {new}); valid keys:")


# ------------------------------------------------------------------------------- bad input


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["harness.tasks=', '"], r"harness.tasks=', ' names no task"),
        (["harness.tasks=x", "eval.stride=4"], r"eval.stride=4 is for scoring text"),
        (["harness.limit=5"], r"harness.limit set without harness.tasks"),
        ([], r"mode=harness needs tasks: harness.tasks=TASK"),
        (["harness.tasks=x", "harness.limit=1.5"], r"whole number of examples"),
        (["harness.tasks=x", "harness.num_fewshot=-1"], r"num_fewshot=-1 must be"),
        (["harness.tasks=x", "harness.batch_size=0"], r"batch_size=0 must be >= 1"),
        (["harness.tasks=x", "data.path=a.txt"], r"data.path chooses text to score, but"),
        (["harness.tasks=x", "eval.weights=untrained"], r"eval.weights=untrained is for tinylm"),
    ],
)
def test_bad_settings_are_one_line(tiny_checkpoints, overrides, message) -> None:
    with pytest.raises(ValueError, match=message):
        evaluate(tiny_checkpoints["decoder"], *overrides)


def test_harness_settings_are_for_mode_harness_alone(tiny_checkpoints) -> None:
    ckpt = tiny_checkpoints["decoder"]
    with pytest.raises(ValueError, match=r"^harness.tasks is for mode=harness .*mode=eval does"):
        harness_settings(ckpt, "harness.tasks=x", "harness.limit=2", mode="eval")
    with pytest.raises(ValueError, match=r"^harness.batch_size is for mode=harness .*mode=train"):
        harness_settings(ckpt, "harness.batch_size=4", mode="train")
    if "heads" in feature_groups():  # its heads.prune gates heads off for mode=eval's text
        with pytest.raises(ValueError, match=r"heads.prune is for mode=eval .*mode=harness does"):
            harness_settings(ckpt, "harness.tasks=x", "heads.prune=0.5")


def test_an_encoder_is_sent_to_pairs_and_fine_tuning(tiny_checkpoints) -> None:
    with pytest.raises(ValueError, match=r"is an encoder: mode=harness .* mode=pairs .*fine-tune"):
        evaluate(tiny_checkpoints["encoder"], "harness.tasks=x")


@pytest.mark.parametrize("missing", ["lm_eval", "accelerate"])
def test_a_missing_harness_says_how_to_install_it(tiny_checkpoints, monkeypatch, missing):
    monkeypatch.setitem(sys.modules, missing, None)  # `import missing` raises ImportError
    monkeypatch.delitem(sys.modules, "lm_eval.models.huggingface", raising=False)
    message = rf"\({missing} is not installed\): pip install -e \"\.\[eval\]\""
    with pytest.raises(ValueError, match=message):
        evaluate(tiny_checkpoints["decoder"], "harness.tasks=x")


def test_an_include_directory_without_yamls_is_refused(tiny_checkpoints, tmp_path) -> None:
    (tmp_path / "notes.txt").write_text("no tasks here\n")
    ckpt = tiny_checkpoints["decoder"]
    with pytest.raises(ValueError, match=rf"harness.include={tmp_path} holds no task YAML"):
        evaluate(ckpt, "harness.tasks=x", f"harness.include={tmp_path}")
    with pytest.raises(FileNotFoundError, match=r"harness.include=.*nowhere is not a directory"):
        evaluate(ckpt, "harness.tasks=x", f"harness.include={tmp_path / 'nowhere'}")


def test_an_unknown_task_is_named_with_the_close_ones(tiny_checkpoints, tmp_path) -> None:
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    """A misspelt task of the include directory, of the harness's own, and a task a group
    names that nothing defines."""
    tasks = write_task(tmp_path / "tasks", "choice")
    (tasks / "broken.yaml").write_text(f"group: broken\ntask: [choice, nosuch]\n{AGGREGATE}")
    with pytest.raises(ValueError) as err:
        evaluate(
            tiny_checkpoints["decoder"],
            "harness.tasks=[choise,hellaswagg,broken]",
            f"harness.include={tasks}",
        )
    message = str(err.value)
    assert "unknown harness task(s) choise (did you mean choice" in message
    assert "hellaswagg (did you mean hellaswag" in message and "\n" not in message
    assert ", nosuch" in message


@pytest.mark.parametrize("offline_at_import", [True, False])
def test_a_hub_task_fails_fast_offline(tiny_checkpoints, tmp_path, monkeypatch, offline_at_import):
    """Offline mode (the datasets library's, set before it is imported) finds no cached copy;
    without it, the Hub is found unreachable (here: switched off in the environment) before
    anything is loaded."""
    pytest.importorskip("accelerate", reason='the harness\'s HF model: pip install -e ".[eval]"')
    import datasets
    import huggingface_hub.constants

    monkeypatch.setattr(datasets.config, "HF_HUB_OFFLINE", offline_at_import)
    monkeypatch.setattr(huggingface_hub.constants, "HF_HUB_OFFLINE", True)  # never the network
    monkeypatch.setenv("HF_HUB_OFFLINE", "1")
    tasks = write_task(tmp_path / "tasks", "hubby", dataset_path="tinylm-tests/no-such-dataset")
    with pytest.raises(ConnectionError) as err:
        evaluate(tiny_checkpoints["decoder"], "harness.tasks=hubby", f"harness.include={tasks}")
    message = str(err.value)
    assert message.startswith("mode=harness cannot load its data (hubby")
    assert "tinylm-tests/no-such-dataset" in message and "harness.include=DIR" in message
    if not offline_at_import:
        up_front = "hubby reads tinylm-tests/no-such-dataset): the Hugging Face Hub is switched off"
        assert up_front in message
