"""Regression fine-tuning (finetune.problem=regression, GLUE's stsb): a synthetic file whose
score is a known function of the text, its metrics against scipy, the export to transformers,
mode=eval and mode=generate on the regression checkpoint, and the inputs refused in one line."""

from __future__ import annotations

import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch
from scipy import stats

from conf.hydra_runtime import parse_settings
from data.tokenizer import special_tokens_of, tokenizer_from_json
from features.finetune.checkpoints import load_classifier
from features.finetune.encoding import PadCollator, encode_examples
from features.finetune.labelled import Example, load_task
from features.finetune.task import average_ranks, pearson, spearman
from tests.conftest import compose_config
from tests.features.finetune.test_finetune import copy_checkpoint, finetune
from train import run

# Enough steps for the tiny BERT to learn the count and its scale: 12 epochs of 7 batches
# (at 6 it ranks the texts but its predictions barely beat the constant's squared error).
PROTOCOL = ["finetune.batch_size=8", "finetune.epochs=12", "finetune.lr=3e-3"]
SPLITS = {"val_fraction": 0.1, "test_fraction": 0.25}  # 20 test examples
CARVED = [f"finetune.{key}={value}" for key, value in SPLITS.items()]


def score_file(path: Path, n: int = 80) -> Path:
    """Texts of six words, each "for" or "raise"; the score is 0.25 per "raise" beyond three,
    plus 0.05 (near 0 and small: the head starts at 0 and a few steps move it little)."""
    rng = np.random.default_rng(0)
    rows = []
    for _ in range(n):
        words = rng.choice(["for", "raise"], size=6)
        rows.append(
            {"text": " ".join(words), "label": 0.25 * (int((words == "raise").sum()) - 3) + 0.05}
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def regressed(tiny_checkpoints, tmp_path_factory) -> dict:
    root = tmp_path_factory.mktemp("regression")
    data = score_file(root / "scores.jsonl")
    pre = copy_checkpoint(tiny_checkpoints["encoder"], root)
    task = ["finetune.task=files", f"finetune.path={data}", "finetune.problem=regression"]
    metrics = finetune(pre, root / "ft", *task, *PROTOCOL, *CARVED)
    return {"pre": pre, "data": data, "task": task, "metrics": metrics}


def _test_predictions(best: str, data: Path) -> tuple[torch.Tensor, torch.Tensor, list[str]]:
    """The checkpoint's predictions [N] and the scores [N] of the file's carved test split."""
    loaded = load_classifier(best)
    task = load_task("files", path=str(data), problem="regression", **SPLITS)
    examples = task.splits["test"]
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    rows = encode_examples(examples, tokenizer, arch="encoder", max_len=64, token_types=False)
    batch = PadCollator(special_tokens_of(tokenizer).pad_id)(rows)
    with torch.no_grad():
        predicted = loaded.model(batch["input_ids"], batch["attention_mask"])[:, 0]  # (N,)
    # float64, so that scipy computes in double precision as tinylm's metrics do
    return predicted.double(), batch["labels"].double(), [e.text for e in examples]


def test_regression_learns_the_score_and_its_metrics_are_scipys(regressed) -> None:
    metrics = regressed["metrics"]
    assert metrics["problem"] == "regression" and metrics["metric"] == "pearson_spearman"
    assert metrics["label_names"] == [] and "test_confusion" not in metrics
    predicted, true, _ = _test_predictions(metrics["best_ckpt"], regressed["data"])
    assert metrics["test_pearson"] == pytest.approx(stats.pearsonr(predicted, true)[0], abs=1e-5)
    assert metrics["test_spearman"] == pytest.approx(stats.spearmanr(predicted, true)[0], abs=1e-5)
    assert metrics["test_pearson_spearman"] == pytest.approx(
        (metrics["test_pearson"] + metrics["test_spearman"]) / 2
    )
    mse = float(((predicted - true) ** 2).mean())
    assert metrics["test_mse"] == pytest.approx(mse, rel=1e-5)
    train = load_task("files", path=str(regressed["data"]), problem="regression", **SPLITS)
    train = train.splits["train"]
    constant = float(np.mean([e.label for e in train]))  # the best constant a model can learn
    assert mse < 0.5 * float(((true - constant) ** 2).mean()) and metrics["test_pearson"] > 0.5
    record = json.loads((regressed["pre"].parent / "eval.jsonl").read_text().splitlines()[-1])
    assert record["metric"] == "pearson_spearman" and record["higher_is_better"]
    assert record["value"] == metrics["test_pearson_spearman"]


def test_correlations_with_ties_and_constants_match_scipy() -> None:
    rng = np.random.default_rng(1)
    x = torch.tensor(rng.integers(0, 5, 40), dtype=torch.float32)  # many ties
    y = x + torch.tensor(rng.normal(0, 2, 40), dtype=torch.float32)
    assert average_ranks(torch.tensor([3.0, 1.0, 3.0, 2.0])).tolist() == [3.5, 1.0, 3.5, 2.0]
    assert pearson(x, y) == pytest.approx(stats.pearsonr(x, y)[0], abs=1e-6)
    assert spearman(x, y) == pytest.approx(stats.spearmanr(x, y)[0], abs=1e-6)
    assert pearson(torch.ones(5), y[:5]) == 0.0  # undefined for a constant: 0, not NaN


def test_regression_export_loads_in_transformers_with_the_same_scores(regressed, tmp_path) -> None:
    transformers = pytest.importorskip("transformers")
    best = regressed["metrics"]["best_ckpt"]
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
    ours, _, texts = _test_predictions(best, regressed["data"])
    hf_model = transformers.AutoModelForSequenceClassification.from_pretrained(out)
    assert hf_model.config.problem_type == "regression" and hf_model.config.num_labels == 1
    encoded = transformers.AutoTokenizer.from_pretrained(out)(
        texts, padding=True, return_tensors="pt"
    )
    with torch.no_grad():
        theirs = hf_model(**encoded).logits[:, 0]  # (N,)
    torch.testing.assert_close(theirs.double(), ours, atol=1e-4, rtol=0)


def test_eval_and_generate_on_a_regression_checkpoint(regressed, tmp_path, capsys) -> None:
    metrics = regressed["metrics"]
    best = metrics["best_ckpt"]
    (row,) = run(compose_config("mode=eval", f"ckpt_path={best}", f"output_dir={tmp_path}"))[
        "results"
    ]
    assert row["metric"] == "pearson_spearman" and "per_class" not in row
    assert row["value"] == pytest.approx(metrics["test_pearson_spearman"], abs=1e-6)
    assert row["mse"] == pytest.approx(metrics["test_mse"], rel=1e-5)
    with pytest.raises(ValueError, match="finetune.task=glue with the Hub is a suite of tasks"):
        run(compose_config("mode=eval", f"ckpt_path={best}", "output_dir=x", "finetune.task=glue"))
    capsys.readouterr()
    prompt = "raise raise raise for for for"
    result = run(
        compose_config("mode=generate", f"ckpt_path={best}", f"prompt='{prompt}'", "output_dir=x")
    )
    assert capsys.readouterr().out.strip().splitlines()[-1] == f"score {result['score']:.4f}"
    loaded = load_classifier(best)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)
    rows = encode_examples(
        [Example(prompt, None, 0.0)], tokenizer, arch="encoder", max_len=64, token_types=False
    )
    batch = PadCollator(special_tokens_of(tokenizer).pad_id)(rows)
    with torch.no_grad():
        expected = float(loaded.model(batch["input_ids"], batch["attention_mask"])[0, 0])
    assert result["score"] == pytest.approx(expected, abs=1e-6)


# ------------------------------------------------------------------------------ bad input


def _one_line(err: pytest.ExceptionInfo, pattern: str) -> None:
    message = str(err.value)
    assert "\n" not in message and re.search(pattern, message), message


def test_numeric_labels_without_a_problem_name_both_choices(regressed, tmp_path) -> None:
    with pytest.raises(ValueError) as err:
        finetune(
            regressed["pre"],
            tmp_path / "out",
            "finetune.task=files",
            f"finetune.path={regressed['data']}",
        )
    _one_line(
        err,
        r"labels of .*scores\.jsonl are all numbers \('0\.05', .*finetune\.problem=regression"
        r".*finetune\.problem=classification",
    )
    assert not (tmp_path / "out").exists()
    whole = tmp_path / "whole.jsonl"  # whole numbers are classes, as before
    whole.write_text(
        "".join(json.dumps({"text": f"t {i}", "label": i % 2}) + "\n" for i in range(20))
    )
    assert load_task("files", path=str(whole)).label_names == ["0", "1"]


def test_regression_inputs_refused_in_one_line(regressed, tmp_path) -> None:
    words = tmp_path / "words.jsonl"
    words.write_text("".join(json.dumps({"text": "a b", "label": x}) + "\n" for x in "ab" * 10))
    with pytest.raises(ValueError) as err:
        load_task("files", path=str(words), problem="regression")
    _one_line(err, r"the train split has the label\(s\) 'a', 'b'.*which are not numbers")
    with pytest.raises(ConnectionError) as err:
        load_task("stsb")
    _one_line(err, r"cannot load GLUE's stsb: the Hugging Face Hub is .*finetune.task=stsb")
    with pytest.raises(ValueError) as err:
        load_task("stsb", problem="classification")
    _one_line(err, "finetune.problem=classification does not fit finetune.task=stsb")
    for overrides, pattern in (
        (["finetune.problem=ordinal"], "finetune.problem=ordinal is unknown"),
        (["finetune.task=stsb", "finetune.metric=f1"], "not a regression's metric"),
        (["finetune.problem=regression", "finetune.metric=accuracy"], "not a regression's"),
    ):
        with pytest.raises(ValueError) as err:
            parse_settings(
                compose_config("mode=finetune", "ckpt_path=x", "output_dir=o", *overrides)
            )
        _one_line(err, pattern)
