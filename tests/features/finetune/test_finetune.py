"""mode=finetune end to end on the tiny checkpoints: records, pretrained against scratch
weights, resume to the same metric, and each bad input in one line with nothing written."""

from __future__ import annotations

import csv
import json
import re
import shutil
from dataclasses import replace
from pathlib import Path

import pytest
import torch

import features.finetune.command
import modes.eval
from conf.command_line import check_command_line
from conf.features import feature_modes
from conf.hydra_runtime import parse_settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.finetune.checkpoints import load_classifier
from features.finetune.encoding import PadCollator, encode_examples
from features.finetune.labelled import Columns, Example, load_task
from modes import Interrupted
from tests.conftest import compose_config
from tests.faults import SignalAtStep
from train import run

# A few steps of a tiny protocol: 2 epochs of 4 batches of the small task below.
QUICK = ["finetune.batch_size=8", "finetune.epochs=2", "finetune.lr=1e-3", "logger=none"]
LABELS = ("loop", "call", "raise")
WORDS = {"loop": "for while range", "call": "def return lambda", "raise": "raise except try"}


def _task_file(path: Path, n: int = 48) -> Path:
    """Three separable classes: each text draws from its class's words."""
    rows = []
    for i in range(n):
        label = LABELS[i % 3]
        words = WORDS[label].split()
        text = " ".join(words[(i + j) % 3] for j in range(4 + i % 3))
        rows.append({"text": f"the {text} statement", "label": label})
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def copy_checkpoint(ckpt: Path, where: Path) -> Path:
    """A pretrained checkpoint of its own, so that its eval.jsonl is this test's."""
    target = where / "pre" / "checkpoints" / "last.ckpt"
    target.parent.mkdir(parents=True)
    shutil.copy(ckpt, target)
    return target


def finetune(ckpt: Path, out: Path, *overrides: str, callbacks=()) -> dict:
    cfg = compose_config(
        "mode=finetune", f"ckpt_path={ckpt}", f"output_dir={out}", *QUICK, *overrides
    )
    return run(cfg, callbacks)


@pytest.fixture(scope="module")
def tuned(tiny_checkpoints, tmp_path_factory) -> dict:
    """Per architecture: the pretrained copy, and fine-tunes from it (pretrained, scratch)."""
    root = tmp_path_factory.mktemp("finetune")
    data = _task_file(root / "task.jsonl")
    found = {}
    for arch, ckpt in tiny_checkpoints.items():
        pre = copy_checkpoint(ckpt, root / arch)
        task = ["finetune.task=files", f"finetune.path={data}"]
        found[arch] = {
            "pre": pre,
            "data": task,
            "pretrained": finetune(pre, root / arch / "pretrained", *task),
            "scratch": finetune(pre, root / arch / "scratch", *task, "finetune.init=scratch"),
        }
    return found


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_finetune_writes_metrics_and_a_record_beside_the_pretrained(tuned, arch) -> None:
    runs = tuned[arch]
    metrics = runs["pretrained"]
    assert metrics["status"] == "completed" and metrics["arch"] == arch
    assert metrics["label_names"] == sorted(LABELS) and metrics["n"] == {
        "train": 38,
        "validation": 5,
        "test": 5,
    }
    assert metrics["step"] == 2 * 5  # 2 epochs of ceil(38 / 8) batches
    confusion = torch.tensor(metrics["test_confusion"])
    assert confusion.sum() == 5
    assert metrics["test_accuracy"] == pytest.approx(float(confusion.trace() / 5))
    stored = json.loads((Path(metrics["best_ckpt"]).parents[1] / "metrics.json").read_text())
    assert stored["test_accuracy"] == metrics["test_accuracy"]
    records = [
        json.loads(line) for line in (runs["pre"].parent / "eval.jsonl").read_text().splitlines()
    ]
    assert {(r["init"], r["task"], r["split"], r["metric"]) for r in records} == {
        ("pretrained", "files", "test", "accuracy"),
        ("scratch", "files", "test", "accuracy"),
    }
    mine = next(r for r in records if r["init"] == "pretrained")
    assert mine["value"] == metrics["test_accuracy"] and mine["n"] == 5
    assert mine["finetuned"] == metrics["best_ckpt"] and mine["seed"] == metrics["seed"]


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_pretrained_init_starts_from_the_checkpoint_and_scratch_does_not(tuned, arch) -> None:
    pre = torch.load(tuned[arch]["pre"], weights_only=True)["state_dict"]
    key = "model.blocks.0.mlp.fc1.weight"
    start = pre[key]
    distance = {}
    for init in ("pretrained", "scratch"):
        tuned_ckpt = torch.load(tuned[arch][init]["best_ckpt"], weights_only=True)
        moved = tuned_ckpt["state_dict"][key.replace("model.", "model.backbone.")]
        distance[init] = float((moved - start).norm() / start.norm())
        assert tuned_ckpt["hyper_parameters"]["classifier"]["label_names"] == sorted(LABELS)
    # A few steps at lr 1e-3 move the pretrained weights by a few percent; scratch's are others.
    assert distance["pretrained"] < 0.2 < distance["scratch"]


def test_interrupted_finetune_resumes_to_the_same_metric(tuned, tmp_path) -> None:
    runs = tuned["encoder"]  # dropout on: exact only with the RNG states restored
    full = runs["pretrained"]
    with pytest.raises(Interrupted, match="at step 3.*mode=finetune ckpt_path="):
        finetune(runs["pre"], tmp_path / "cut", *runs["data"], callbacks=[SignalAtStep(3)])
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    resumed = finetune(last, tmp_path / "resumed", *runs["data"])
    assert resumed["step"] == full["step"]
    assert resumed["pretrained"] == full["pretrained"]
    assert resumed["test_loss"] == pytest.approx(full["test_loss"], abs=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(full["best_val_loss"], abs=1e-6)


def test_builtin_task_through_the_mode(tiny_checkpoints, tmp_path) -> None:
    pre = copy_checkpoint(tiny_checkpoints["decoder"], tmp_path)
    metrics = finetune(pre, tmp_path / "ft", "finetune.max_steps=2", "finetune.epochs=1")
    assert metrics["task"] == "builtin" and len(metrics["label_names"]) == 8
    assert metrics["step"] == 2 and sum(map(sum, metrics["test_confusion"])) == metrics["n"]["test"]


# ------------------------------------------------------------------------------ bad input


def _refused(tmp_path: Path, pre: Path, match: str, *overrides: str) -> None:
    """One line, and nothing written: no run directory, no record beside the checkpoint."""
    out = tmp_path / "refused"
    with pytest.raises((ValueError, FileNotFoundError, ConnectionError)) as err:
        finetune(pre, out, *overrides)
    message = str(err.value)
    assert "\n" not in message and re.search(match, message), message
    assert not out.exists() and not (pre.parent / "eval.jsonl").exists()


@pytest.fixture
def pre(tiny_checkpoints, tmp_path) -> Path:
    return copy_checkpoint(tiny_checkpoints["encoder"], tmp_path)


def _write(path: Path, rows: list[dict]) -> str:
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return str(path)


def test_file_without_the_columns_names_the_ones_it_has(pre, tmp_path) -> None:
    data = _write(tmp_path / "d.jsonl", [{"sentence": "a b", "y": 0}, {"sentence": "c", "y": 1}])
    _refused(
        tmp_path,
        pre,
        r"no column finetune.text_column='text', finetune.label_column='label'; its columns "
        r"are \['sentence', 'y'\]",
        "finetune.task=files",
        f"finetune.path={data}",
    )


def test_label_unseen_in_train(pre, tmp_path) -> None:
    train = _write(tmp_path / "t.jsonl", [{"text": "a", "label": "x"}, {"text": "b", "label": "y"}])
    val = _write(tmp_path / "v.jsonl", [{"text": "c", "label": "z"}])
    _refused(
        tmp_path,
        pre,
        r"validation split has the label\(s\) 'z' that no train example has",
        "finetune.task=files",
        f"finetune.path={{train: {train}, validation: {val}, test: {val}}}",
    )


def test_a_single_class(pre, tmp_path) -> None:
    data = _write(tmp_path / "d.jsonl", [{"text": str(i), "label": "x"} for i in range(20)])
    _refused(tmp_path, pre, "two classes at least", "finetune.task=files", f"finetune.path={data}")


def test_an_empty_split(pre, tmp_path) -> None:
    train = _write(tmp_path / "t.jsonl", [{"text": "a", "label": 0}, {"text": "b", "label": 1}])
    empty = tmp_path / "empty.jsonl"
    empty.write_text("")
    _refused(
        tmp_path,
        pre,
        "the validation split holds no example",
        "finetune.task=files",
        f"finetune.path={{train: {train}, validation: {empty}, test: {train}}}",
    )


def test_pairs_given_to_a_task_without_them(pre, tmp_path) -> None:
    _refused(tmp_path, pre, "builtin task .* has no second text", "finetune.text_pair_column=b")
    with pytest.raises(ValueError, match="GLUE's sst2 \\(single sentences\\)"):
        load_task("sst2", columns=Columns(pair="sentence2"))


def test_glue_offline_fails_fast_in_one_line(pre, tmp_path) -> None:
    _refused(
        tmp_path, pre, "cannot load GLUE's sst2: the Hugging Face Hub is", "finetune.task=sst2"
    )


def test_finetuned_checkpoint_where_a_pretrained_one_is_needed(tuned, tmp_path) -> None:
    done = Path(tuned["decoder"]["pretrained"]["best_ckpt"])
    pre = tuned["decoder"]["pre"]
    with pytest.raises(ValueError, match="already trained to its end; mode=finetune needs a "):
        finetune(done, tmp_path / "again")
    # generate classifies, export writes it, eval scores it on labelled text
    heads = ("heads",) if "heads" in feature_modes() else ()  # another feature's mode, if there
    for mode in ("train", "attention", *heads):
        cfg = compose_config(f"mode={mode}", f"ckpt_path={done}", f"output_dir={tmp_path}")
        with pytest.raises(ValueError, match=f"mode={mode} needs a pretrained checkpoint") as err:
            run(cfg)
        assert str(pre.resolve()) in str(err.value) and "\n" not in str(err.value)
    assert not (tmp_path / "again").exists()


def test_finetune_keys_with_a_typo_get_a_did_you_mean() -> None:
    with pytest.raises(ValueError, match=r"finetune.epoch \(did you mean finetune.epochs\?\)"):
        check_command_line(["mode=finetune", "finetune.epoch=3"])
    with pytest.raises(ValueError, match=r"finetune.task=sst3 is unknown \(did you mean sst2\?\)"):
        finetune(Path("unused.ckpt"), Path("unused"), "finetune.task=sst3")


def test_resume_with_other_settings_is_refused(tuned, tmp_path) -> None:
    runs = tuned["decoder"]
    with pytest.raises(Interrupted):
        finetune(runs["pre"], tmp_path / "cut", *runs["data"], callbacks=[SignalAtStep(2)])
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    with pytest.raises(ValueError, match=r"finetune.lr=0.01 \(checkpoint: 0.001\)"):
        finetune(last, tmp_path / "other", *runs["data"], "finetune.lr=1e-2")


# ------------------------------------------------------------------------ the HF export


@pytest.mark.parametrize("arch", ["decoder", "encoder"])  # GPT-NeoX (rope) and BERT
def test_hf_export_of_a_classifier_matches_and_runs_in_a_pipeline(tuned, tmp_path, arch) -> None:
    transformers = pytest.importorskip("transformers")
    best = tuned[arch]["pretrained"]["best_ckpt"]
    out = tmp_path / "hf"
    run(
        compose_config(
            "mode=export",
            f"ckpt_path={best}",
            "export.format=hf",
            f"export.path={out}",
            f"output_dir={tmp_path}",
        )
    )
    loaded = load_classifier(best)
    names = loaded.hparams["classifier"]["label_names"]
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    texts = ["the for while range statement", "raise"]
    rows = encode_examples(
        [Example(t, None, 0) for t in texts], tokenizer, arch=arch, max_len=64, token_types=False
    )
    batch = PadCollator(special_tokens_of(tokenizer).pad_id)(rows)
    with torch.no_grad():
        ours = loaded.model(batch["input_ids"], batch["attention_mask"])  # (B, K)
    hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(out)
    assert type(hf_model).__name__ == (
        "GPTNeoXForSequenceClassification" if arch == "decoder" else "BertForSequenceClassification"
    )
    assert hf_model.config.id2label == dict(enumerate(names))
    hf_tokenizer = transformers.AutoTokenizer.from_pretrained(out)
    encoded = hf_tokenizer(texts, padding=True, return_tensors="pt")
    assert encoded["input_ids"].tolist() == batch["input_ids"].tolist()  # the same framing
    with torch.no_grad():
        theirs = hf_model(
            input_ids=encoded["input_ids"], attention_mask=encoded["attention_mask"]
        ).logits
    torch.testing.assert_close(theirs, ours, atol=1e-4, rtol=0)
    pipe = transformers.pipeline("text-classification", model=str(out), device="cpu")
    (answer,) = pipe(texts[:1])
    probs = ours[0].softmax(-1)
    assert answer["label"] == names[int(probs.argmax())]
    assert answer["score"] == pytest.approx(float(probs.max()), abs=1e-4)


def test_export_refuses_safetensors_for_a_classifier_and_a_language_model_as_one(tuned) -> None:
    best = tuned["encoder"]["pretrained"]["best_ckpt"]
    with pytest.raises(ValueError, match="fine-tuned classifier: export it with export.format=hf"):
        run(compose_config("mode=export", f"ckpt_path={best}", "output_dir=unused"))
    with pytest.raises(ValueError, match="not a fine-tuned classifier; fine-tune it first"):
        load_classifier(tuned["encoder"]["pre"])


def test_generate_on_a_classifier_prints_the_label_and_its_probability(tuned, capsys) -> None:
    best = tuned["encoder"]["pretrained"]["best_ckpt"]
    cfg = compose_config(
        "mode=generate", f"ckpt_path={best}", "prompt=raise except try", "output_dir=o"
    )
    prediction = run(cfg)
    loaded = load_classifier(best)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    rows = encode_examples(
        [Example("raise except try", None, 0)],
        tokenizer,
        arch="encoder",
        max_len=64,
        token_types=False,
    )
    batch = PadCollator(special_tokens_of(tokenizer).pad_id)(rows)
    with torch.no_grad():
        probs = loaded.model(batch["input_ids"], batch["attention_mask"])[0].softmax(-1)
    names = loaded.hparams["classifier"]["label_names"]
    assert prediction["label"] == names[int(probs.argmax())]
    assert prediction["probability"] == pytest.approx(float(probs.max()), abs=1e-6)
    assert f"{prediction['label']} (p={float(probs.max()):.3f})" in capsys.readouterr().out


# ------------------------------------------------------ mode=eval on a fine-tuned checkpoint


def _evaluate(ckpt: Path, *overrides: str) -> dict:
    """mode=eval with ``overrides`` recorded as the command line's (compose() records none)."""
    cfg = compose_config("mode=eval", f"ckpt_path={ckpt}", "output_dir=unused", *overrides)
    typed = dict(o.split("=", 1) for o in overrides)
    return modes.eval.run(replace(parse_settings(cfg), overrides=typed))


def _records(where: Path) -> list[dict]:
    return [json.loads(line) for line in (where / "eval.jsonl").read_text().splitlines()]


@pytest.fixture
def tuned_copy(tuned, tmp_path) -> Path:
    """The fine-tuned encoder's best checkpoint, alone in a directory of this test's."""
    target = tmp_path / "ft" / "best.ckpt"
    target.parent.mkdir()
    shutil.copy(tuned["encoder"]["pretrained"]["best_ckpt"], target)
    return target


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_eval_scores_a_classifier_on_its_own_test_split_as_finetuning_did(
    tuned, tmp_path, arch
) -> None:
    metrics = tuned[arch]["pretrained"]
    ckpt = tmp_path / "best.ckpt"
    shutil.copy(metrics["best_ckpt"], ckpt)
    (row,) = _evaluate(ckpt)["results"]
    assert (row["task"], row["split"], row["n"], row["metric"]) == ("files", "test", 5, "accuracy")
    assert row["confusion"] == metrics["test_confusion"]
    assert row["value"] == row["accuracy"] == pytest.approx(metrics["test_accuracy"], abs=1e-6)
    assert row["loss"] == pytest.approx(metrics["test_loss"], abs=1e-5)
    assert row["per_class"] == {
        name: {
            "n": sum(metrics["test_confusion"][i]),
            "predicted": sum(r[i] for r in metrics["test_confusion"]),
            "correct": metrics["test_confusion"][i][i],
        }
        for i, name in enumerate(metrics["label_names"])
    }
    (val,) = _evaluate(ckpt, "data.split=validation", "finetune.metric=mcc")["results"]
    assert val["confusion"] == metrics["val_confusion"] and val["metric"] == "mcc"
    assert val["value"] == pytest.approx(metrics["val_mcc"], abs=1e-6)
    _evaluate(ckpt)  # the same evaluation again replaces its own record
    records = _records(tmp_path)
    assert [(r["split"], r["metric"]) for r in records] == [
        ("validation", "mcc"),
        ("test", "accuracy"),
    ]
    assert records[1]["checkpoint"] == str(ckpt.resolve()) and records[1]["n"] == 5


def test_eval_scores_a_labelled_file_whole_against_the_classifier_itself(
    tuned_copy, tmp_path, capsys
) -> None:
    rows = [{"sentence": t, "y": y} for t, y in [("for while", "loop"), ("raise try", "raise")]]
    rows += [{"sentence": "def return lambda", "y": "call"}, {"sentence": "the range", "y": "loop"}]
    data = _write(tmp_path / "heldout.jsonl", rows)
    (row,) = _evaluate(
        tuned_copy,
        "finetune.task=files",
        f"finetune.path={data}",
        "finetune.text_column=sentence",
        "finetune.label_column=y",
    )["results"]
    loaded = load_classifier(tuned_copy)
    names = loaded.hparams["classifier"]["label_names"]
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    encoded = encode_examples(
        [Example(r["sentence"], None, names.index(r["y"])) for r in rows],
        tokenizer,
        arch="encoder",
        max_len=64,
        token_types=False,
    )
    expected = [[0] * len(names) for _ in names]
    for one in encoded:  # one example at a time: no padding to agree on
        with torch.no_grad():
            logits = loaded.model(
                torch.tensor([one["input_ids"]]),
                torch.ones(1, len(one["input_ids"]), dtype=torch.long),
            )
        expected[one["label"]][int(logits.argmax())] += 1
    assert row["confusion"] == expected and row["n"] == 4
    assert (row["data"], row["split"]) == (data, "all")
    assert row["accuracy"] == pytest.approx(sum(expected[i][i] for i in range(3)) / 4)
    out = capsys.readouterr().out
    assert "| class | n | predicted | correct | recall |" in out and "| loop | 2 |" in out


def _refused_eval(ckpt: Path, match: str, *overrides: str) -> None:
    """One line, and no record written beside the checkpoint."""
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        _evaluate(ckpt, *overrides)
    assert "\n" not in str(err.value) and re.search(match, str(err.value)), str(err.value)
    assert not (ckpt.parent / "eval.jsonl").exists()


def test_eval_of_a_classifier_refuses_language_model_options_and_unknown_labels(
    tuned_copy, tmp_path
) -> None:
    lm_options = {"eval.stride=8": "eval.stride", "eval.weights=untrained": "eval.weights"}
    lm_options["data.path=x.txt"] = "data.path"
    for option, key in lm_options.items():
        _refused_eval(
            tuned_copy, f"{key} is for scoring a language model, but .* is a classifier", option
        )
    _refused_eval(tuned_copy, "finetune.lr is a fine-tuning setting", "finetune.lr=1e-2")
    _refused_eval(
        tuned_copy, "finetune.text_column describes the labelled text", "finetune.text_column=s"
    )
    data = _write(
        tmp_path / "d.jsonl", [{"text": "a", "label": "loop"}, {"text": "b", "label": "x"}]
    )
    _refused_eval(
        tuned_copy,
        r"d.jsonl \(all of it\) has the label\(s\) 'x' that .* was not fine-tuned on \(its "
        r"classes: 'call'",
        "finetune.task=files",
        f"finetune.path={data}",
    )


def test_eval_of_a_language_model_refuses_the_classifier_options(
    tiny_checkpoints, tmp_path
) -> None:
    ckpt = copy_checkpoint(tiny_checkpoints["decoder"], tmp_path)
    _refused_eval(
        ckpt,
        "finetune.task is not read when mode=eval scores a language model, and .* is one: "
        "drop the finetune",
        "finetune.task=files",
        "finetune.path=labelled.csv",
    )


# ------------------------------------------------ a pretraining sweep fine-tuned, job by job


def _pretraining_sweep(
    root: Path, tiny_checkpoints, jobs: list[tuple[str, str, str, float]]
) -> Path:
    """A sweep directory of (model, seed, status, best_val_loss) jobs: each job's metrics.json
    and, but for a failed one, the tiny checkpoint of its model as checkpoints/best.ckpt."""
    sweep = root / "sweep"
    for number, (model, seed, status, loss) in enumerate(jobs):
        job = sweep / str(number)
        (job / "checkpoints").mkdir(parents=True)
        if status != "failed":
            arch = "decoder" if model == "gpt" else "encoder"
            shutil.copy(tiny_checkpoints[arch], job / "checkpoints" / "best.ckpt")
        overrides = {"model": model, "seed": seed}
        metrics = {"status": status, "best_val_loss": loss, "overrides": overrides}
        (job / "metrics.json").write_text(json.dumps(metrics))
    return sweep


def test_finetune_over_a_pretraining_sweep_groups_its_configurations(
    tiny_checkpoints, tmp_path, capsys
) -> None:
    jobs = [("gpt", "1", "completed", 1.0), ("gpt", "2", "completed", 1.2)]
    jobs += [("bert", "1", "completed", 2.0), ("bert", "2", "interrupted", 2.5)]
    jobs += [("bert", "3", "failed", 9.0)]
    sweep = _pretraining_sweep(tmp_path, tiny_checkpoints, jobs)
    data = _task_file(tmp_path / "task.jsonl")
    out = tmp_path / "tuned"
    task = ["finetune.task=files", f"finetune.path={data}", "finetune.max_steps=2"]
    results = finetune(sweep, out, *task, "finetune.metric=mcc")
    assert sorted(p.name for p in out.iterdir()) == ["0", "1", "2"]  # the completed jobs
    tuned = {n: json.loads((out / n / "metrics.json").read_text()) for n in ("0", "1", "2")}
    for number, metrics in tuned.items():
        assert metrics["pretrained"] == str(
            (sweep / number / "checkpoints" / "best.ckpt").resolve()
        )
        assert metrics["step"] == 2 and metrics["metric"] == "mcc"
        assert _records(sweep / number / "checkpoints")[0]["finetuned"] == metrics["best_ckpt"]
    rows = {r[0]: r for r in _cells(results["configurations"])}
    gpt_mean = (tuned["0"]["test_mcc"] + tuned["1"]["test_mcc"]) / 2
    assert rows["gpt"][1:3] == ["2", "0"] and rows["bert"][1:3] == ["1", "2"]  # n, failed
    assert rows["gpt"][3].startswith(f"{gpt_mean:.4f} ± ")
    assert rows["bert"][3] == f"{tuned['2']['test_mcc']:.4f}"
    assert rows["gpt"][-1] == "1.1" and rows["bert"][-1] == "2"  # pretraining_val_loss
    summary = (sweep / "finetune_summary_files_pretrained.md").read_text()
    assert results["configurations"] in summary and "test_mcc is the mean" in summary
    assert results["configurations"] in capsys.readouterr().out
    assert [tuned[n]["seed"] for n in ("0", "1", "2")] == [1, 2, 1]  # each job's own seed
    # Run again: each completed fine-tune is read, not trained again.
    written = {n: (out / n / "metrics.json").stat().st_mtime_ns for n in tuned}
    again = finetune(sweep, out, *task, "finetune.metric=mcc")
    assert {n: (out / n / "metrics.json").stat().st_mtime_ns for n in tuned} == written
    assert capsys.readouterr().out.count("read, not run again") == 3
    assert again["configurations"] == results["configurations"]
    changed = finetune(sweep, out, *task, "finetune.metric=mcc", "finetune.max_steps=3")
    assert all(run["step"] == 3 for run in changed["runs"] if run.get("status") == "completed")
    cfg = compose_config("mode=finetune", f"ckpt_path={sweep}", f"output_dir={out}", "seed=5")
    typed = replace(parse_settings(cfg), overrides={"seed": "5"})  # as Hydra's runtime has it
    with pytest.raises(ValueError, match=r"^seed=5: the sweep .* swept seed, .* drop seed="):
        features.finetune.command.run(typed)


def _cells(table: str) -> list[list[str]]:
    """The body rows of a markdown table, cell by cell."""
    return [[c.strip() for c in line.strip("|").split("|")] for line in table.splitlines()[2:]]


def test_finetune_over_a_sweep_without_a_completed_job_is_refused(
    tiny_checkpoints, tmp_path
) -> None:
    jobs = [("gpt", "1", "interrupted", 1.0), ("gpt", "2", "failed", 1.0)]
    sweep = _pretraining_sweep(tmp_path, tiny_checkpoints, jobs)
    out = tmp_path / "tuned"
    with pytest.raises(
        ValueError, match=r"no job of the sweep .* has completed \(0: interrupted, 1: failed\)"
    ) as err:
        finetune(sweep, out)
    assert "\n" not in str(err.value) and not out.exists()
    assert not (sweep / "0" / "checkpoints" / "eval.jsonl").exists()


# ------------------------------------------------------ the summary of a sweep of fine-tunes


def test_a_sweep_of_finetunes_is_ranked_by_the_task_metric_highest_first(tuned, tmp_path) -> None:
    from analysis.report_columns import ranking
    from analysis.sweep_summary import write_sweep_summary

    # Real fine-tunes' metrics.json, as a -m sweep over finetune.init and seed records them,
    # with the task metric set apart so the ranking is known: scratch higher, but a worse loss.
    sweep = tmp_path / "sweep"
    base = {init: tuned["decoder"][init] for init in ("pretrained", "scratch")}
    values = {"pretrained": (0.2, 0.25), "scratch": (0.8, 0.85)}
    for number, (init, seed) in enumerate((i, s) for i in values for s in (0, 1)):
        run_dir = sweep / str(number)
        run_dir.mkdir(parents=True)
        metrics = {
            **base[init],
            "test_accuracy": values[init][seed],
            "best_val_loss": 1.0 + (init == "scratch"),
        }
        metrics["overrides"] = {"finetune.init": init, "seed": str(seed + 1)}
        (run_dir / "metrics.json").write_text(json.dumps(metrics))
    assert (
        ranking([json.loads((sweep / "0" / "metrics.json").read_text())]).metric == "test_accuracy"
    )
    written = write_sweep_summary(sweep)
    assert not (sweep / "heatmap_val_loss.png").exists()
    summary = (sweep / "summary.md").read_text()
    table = summary.split("## Configurations")[1].split("## Runs")[0].strip()
    header, *_ = table.splitlines()
    assert "test_accuracy" in header.split("|")[4] and "test_mcc" in header
    rows = {r[0]: r for r in _cells(table)}
    assert rows["scratch"][3] == "0.8250 ± 0.0354" and rows["scratch"][4] == "best"
    assert rows["pretrained"][4] == "-0.6000 (> 2 SE)"
    assert "(the highest)" in summary
    with open(sweep / "summary.csv") as f:
        csv_rows = {r["finetune.init"]: r for r in csv.DictReader(f)}
    assert float(csv_rows["pretrained"]["test_accuracy_mean"]) == pytest.approx(0.225)
    assert sweep / "summary.md" in written
