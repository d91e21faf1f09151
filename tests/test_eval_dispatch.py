"""What ``mode=eval`` (modes/eval.py) does beyond scoring text with a language model: the
refusal of ``heads.prune`` with minimal pairs or harness tasks, what it hands the harness and
the classifier evaluation, the heads it gates off (named, or a fraction) in the record, the
table and the loss, the untrained baseline's weights, minimal pairs over a sweep grouped by
configuration, each checkpoint read once, and the defaults that identify old records; and
(data/evaluation.py) an explicit ``data.source`` beside a reset key of another kind.

Checkpoints are tests/test_eval_edges.py's untrained tiny networks; losses and pair
accuracies are recounted here from the network's logits. The tests answer the survivors of
``python -m tools.mutation --module modes/eval.py`` (65.8% after the code grew pairs,
harness, classifier and heads.prune dispatch) and ``--module data/evaluation.py`` (98.3%)."""

from __future__ import annotations

import contextlib
import io
import json
import math
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

import pytest
import torch

import modes.eval
import modes.eval_classifier
import modes.eval_harness
from analysis.records import write_metrics
from conf.schema import Settings
from data.config import DataConfig
from data.evaluation import data_to_evaluate
from data.pairs import frame_sentence
from data.tokenizer import tokenizer_from_json
from models.config import ModelConfig
from models.transformer import build_model
from tests.corpora import make_paragraphs
from tests.test_eval_edges import WINDOW, _checkpoint, _Scored, _windows_recount, eval_settings
from training.checkpoint import load_checkpoint

LAYERS, HEADS = 2, 4  # tests/tiny_models.py's tiny_config
PRETRAINED = "/runs/pretrained/checkpoints/best.ckpt"
CLASSIFIER = {"task": "sst2", "pretrained": {"checkpoint": PRETRAINED}}


def _run(settings: Settings, callbacks: Sequence[Any] = ()) -> tuple[dict[str, Any], list[str]]:
    """``modes.eval.run``'s result and the lines it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = modes.eval.run(settings, callbacks)
    return result, out.getvalue().splitlines()


def _held_text(tmp_path: Path, paragraphs: list[str]) -> Path:
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    return held


def _with_weights_drawn_from(ckpt: Path, seed: int, path: Path) -> Path:
    """A copy of ``ckpt`` at ``path`` whose network is a fresh one of its shape drawn from
    ``seed`` (as ``eval.weights=untrained seed=SEED`` draws it)."""
    payload = torch.load(ckpt, weights_only=True)
    torch.manual_seed(seed)
    fresh = build_model(ModelConfig.from_dict(payload["hyper_parameters"]["model_config"]))
    for key, value in fresh.state_dict().items():
        assert f"model.{key}" in payload["state_dict"]
        payload["state_dict"][f"model.{key}"] = value
    path.parent.mkdir(parents=True, exist_ok=True)
    torch.save(payload, path)
    return path


def _classifier(path: Path) -> Path:
    """An untrained tiny decoder whose hyper-parameters say it is a classifier fine-tuned on
    sst2 (nothing here loads it as one)."""
    payload = torch.load(_checkpoint(path, "decoder", make_paragraphs(6)), weights_only=True)
    payload["hyper_parameters"]["classifier"] = CLASSIFIER
    torch.save(payload, path)
    return path


def _records(eval_jsonl: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in eval_jsonl.read_text().splitlines()]


def _mask_without(heads: Sequence[tuple[int, int]]) -> torch.Tensor:
    mask = torch.ones(LAYERS, HEADS)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


class _Calls:
    """A stand-in for a command: records the arguments of each call, then returns
    ``returned``, or what ``then`` (the real command, to spy on it) returns for them."""

    def __init__(self, returned: Any = None, then: Callable[..., Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.returned = returned
        self.then = then

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.then(*args) if self.then else self.returned


@pytest.mark.parametrize("asked", ["eval.pairs=PAIRS", "eval.harness=hellaswag"])
def test_heads_prune_with_pairs_or_harness_is_refused_whole(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, asked: str
) -> None:
    """Pairs and harness tasks score the checkpoint whole: a gate would be ignored."""
    ckpt = _checkpoint(tmp_path / "best.ckpt", "decoder", make_paragraphs(6))
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text(json.dumps({"sentence_good": "a b", "sentence_bad": "b a"}) + "\n")
    harness = _Calls(returned={"results": []})
    monkeypatch.setattr(modes.eval_harness, "run", harness)
    settings = eval_settings(ckpt, tmp_path, asked.replace("PAIRS", str(pairs)), "heads.prune=0.5")
    with pytest.raises(ValueError) as error:
        _run(settings)
    assert str(error.value) == (
        "heads.prune gates heads off for tinylm's text scoring; eval.pairs and eval.harness "
        "score the checkpoint whole: drop heads.prune or them"
    )
    assert harness.calls == [] and not (tmp_path / "eval.jsonl").exists()


def test_harness_tasks_are_handed_the_settings_and_callbacks(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    ckpt = _checkpoint(tmp_path / "best.ckpt", "decoder", make_paragraphs(6))
    harness = _Calls(returned={"results": ["harness rows"], "eval_jsonl": "harness's"})
    monkeypatch.setattr(modes.eval_harness, "run", harness)
    settings, callbacks = eval_settings(ckpt, tmp_path, "eval.harness=hellaswag"), [_Scored()]
    result, _ = _run(settings, callbacks)
    assert result == {"results": ["harness rows"], "eval_jsonl": "harness's"}
    ((handed_settings, handed_callbacks),) = harness.calls
    assert handed_settings is settings and handed_callbacks is callbacks


def test_classifiers_are_handed_to_their_evaluation_with_the_first_one_read(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    sweep = tmp_path / "sweep"
    found = [_classifier(sweep / job / "checkpoints" / "best.ckpt") for job in ("0", "1")]
    evaluation = _Calls(returned={"results": ["classifier rows"]})
    monkeypatch.setattr(modes.eval_classifier, "run", evaluation)
    settings, callbacks = eval_settings(sweep, tmp_path), [_Scored()]
    result, _ = _run(settings, callbacks)
    assert result == {"results": ["classifier rows"]}
    ((handed_settings, checkpoints, first, handed_callbacks),) = evaluation.calls
    assert handed_settings is settings and handed_callbacks is callbacks
    assert checkpoints == found
    assert first["hyper_parameters"]["classifier"] == CLASSIFIER


def test_a_language_model_given_finetune_settings_is_refused_by_name(tmp_path: Path) -> None:
    ckpt = _checkpoint(tmp_path / "best.ckpt", "decoder", make_paragraphs(6))
    with pytest.raises(ValueError) as error:
        _run(eval_settings(ckpt, tmp_path, "finetune.task=builtin"))
    assert str(error.value) == (
        f"finetune.task chooses labelled text for a fine-tuned classifier, but {ckpt} is a "
        "language model: drop the finetune.* settings (to fine-tune it: python train.py "
        f"mode=finetune ckpt_path={ckpt})"
    )


def test_a_classifier_in_a_sweep_of_language_models_is_refused_by_name(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(6)
    sweep = tmp_path / "sweep"
    _checkpoint(sweep / "0" / "checkpoints" / "best.ckpt", "decoder", paragraphs)
    classifier = _classifier(sweep / "1" / "checkpoints" / "best.ckpt")
    with pytest.raises(ValueError) as error:
        _run(eval_settings(sweep, tmp_path, f"data.path={_held_text(tmp_path, paragraphs)}"))
    assert str(error.value) == (
        f"{classifier} is a classifier fine-tuned on sst2 (mode=finetune), not a language "
        "model; mode=eval needs a pretrained checkpoint, such as the one it was fine-tuned "
        f"from: {PRETRAINED}"
    )


def test_named_heads_are_gated_off_in_every_record_and_each_checkpoint_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a sweep of two runs: the loss is the recount with those heads at 0, the record
    and the table name them (in the order given), and no checkpoint is read twice."""
    paragraphs = make_paragraphs(6)
    sweep = tmp_path / "sweep"
    found = [
        _checkpoint(sweep / job / "checkpoints" / "best.ckpt", "decoder", paragraphs)
        for job in ("0", "1")
    ]
    read = _Calls(then=modes.eval.read_checkpoint)
    monkeypatch.setattr(modes.eval, "read_checkpoint", read)
    named = ["1:3", "0:0", "0:1", "0:2", "1:1", "1:2"]  # all but a head of each layer
    held = _held_text(tmp_path, paragraphs)
    settings = eval_settings(
        sweep, tmp_path, f"data.path={held}", f"heads.prune=[{','.join(named)}]"
    )
    result, printed = _run(settings)
    assert [str(path) for (path,) in read.calls] == [str(path) for path in found]
    gated = [(int(name[0]), int(name[2])) for name in named]
    expected = _windows_recount(found[0], paragraphs, WINDOW, _mask_without(gated))
    whole = _windows_recount(found[0], paragraphs, WINDOW)
    assert whole["loss"] != pytest.approx(expected["loss"], rel=1e-4)  # the gate matters
    records = result["results"]
    for record, ckpt in zip(records, found, strict=True):
        assert record["checkpoint"] == str(ckpt.resolve())
        assert record["heads_prune"] == record["heads_pruned"] == named
        assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    columns = (*modes.eval.COLUMNS, "heads_pruned")
    assert printed[0] == "| " + " | ".join(columns) + " |"
    assert printed[2].endswith(f" | {named} |")
    assert _records(sweep / "eval.jsonl") == records


def test_a_fraction_of_heads_gates_off_that_many_never_a_layers_last(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(6)
    ckpt = _checkpoint(tmp_path / "run" / "best.ckpt", "decoder", paragraphs)
    held = _held_text(tmp_path, paragraphs)
    result, _ = _run(eval_settings(ckpt, tmp_path, f"data.path={held}", "heads.prune=0.5"))
    (record,) = result["results"]
    assert record["heads_prune"] == 0.5
    pruned = [tuple(int(i) for i in name.split(":")) for name in record["heads_pruned"]]
    assert len(set(pruned)) == len(pruned) == round(0.5 * LAYERS * HEADS)
    for layer in range(LAYERS):  # each layer keeps a head
        assert sum(gone == layer for gone, _ in pruned) < HEADS
    expected = _windows_recount(ckpt, paragraphs, WINDOW, _mask_without(pruned))
    assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)


def test_untrained_weights_are_drawn_from_the_seed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paragraphs = make_paragraphs(6)
    ckpt = _checkpoint(tmp_path / "run" / "best.ckpt", "decoder", paragraphs)
    fresh = _with_weights_drawn_from(ckpt, 3, tmp_path / "fresh" / "best.ckpt")
    stamped = _Calls(then=modes.eval.provenance)
    monkeypatch.setattr(modes.eval, "provenance", stamped)
    held = _held_text(tmp_path, paragraphs)
    settings = eval_settings(
        ckpt, tmp_path, f"data.path={held}", "eval.weights=untrained", "seed=3"
    )
    result, printed = _run(settings)
    (record,) = result["results"]
    expected = _windows_recount(fresh, paragraphs, WINDOW)
    trained = _windows_recount(ckpt, paragraphs, WINDOW)
    assert not math.isclose(expected["loss"], trained["loss"], rel_tol=1e-4)
    assert (record["weights"], record["weights_seed"]) == ("untrained", 3)
    assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert "heads_prune" not in record and "heads_pruned" not in printed[0]
    assert stamped.calls == [("32-true", settings.trainer.accelerator)]


def _sentence_score(model: torch.nn.Module, ids: list[int]) -> float:
    """sum_i log p(x_i | x_<i) of ``[EOS] sentence`` from the network's logits, in float64."""
    with torch.no_grad():
        logits = model.eval()(torch.tensor([ids[:-1]]))[0].double()
    log_probs = torch.log_softmax(logits, dim=-1)
    return sum(float(log_probs[i, ids[i + 1]]) for i in range(len(ids) - 1))


def _pair_accuracy(ckpt: Path, pairs: list[dict[str, str]]) -> float:
    """The share of pairs whose good sentence scores strictly above its bad one."""
    loaded = load_checkpoint(ckpt)
    tokenizer = tokenizer_from_json(loaded.tokenizer_json)

    def score(text: str) -> float:
        ids = frame_sentence(tokenizer, text, "decoder", WINDOW, "test")
        return _sentence_score(loaded.model, ids)

    right = [score(p["sentence_good"]) > score(p["sentence_bad"]) for p in pairs]
    return sum(right) / len(right)


PAIRS = [
    {"sentence_good": good, "sentence_bad": bad, "UID": uid}
    for good, bad, uid in (
        ("the cat sat", "cat the sat", "order"),
        ("a dog ran", "dog a ran", "order"),
        ("it is red", "it are red", "agreement"),
        ("they are here", "they is here", "agreement"),
        ("we were there", "we was there", "agreement"),
        ("she has it", "she have it", "agreement"),
    )
]


def test_pairs_over_a_sweep_are_grouped_by_their_accuracy_over_every_pair(
    tmp_path: Path,
) -> None:
    """Two configurations (different networks): a record per paradigm and one over every
    pair each, and the sweep's table of the overall accuracy, the higher the better."""
    paragraphs = make_paragraphs(6)
    base = _checkpoint(tmp_path / "base.ckpt", "decoder", paragraphs)
    sweep = tmp_path / "sweep"
    accuracy = {}
    for job, (dropout, seed) in enumerate((("0.0", 1), ("0.1", 2))):
        ckpt = _with_weights_drawn_from(base, seed, sweep / str(job) / "checkpoints" / "best.ckpt")
        write_metrics(ckpt.parent.parent, {"overrides": {"model.dropout": dropout}})
        accuracy[dropout] = _pair_accuracy(ckpt, PAIRS)
    assert accuracy["0.0"] != accuracy["0.1"]  # so the table has a best
    pairs = tmp_path / "pairs.jsonl"
    pairs.write_text("".join(json.dumps(p) + "\n" for p in PAIRS))
    result, printed = _run(eval_settings(sweep, tmp_path, f"eval.pairs={pairs}"))
    records = result["results"]
    assert [(r["checkpoint"].split("/")[-3], r["paradigm"], r["n_pairs"]) for r in records] == [
        (job, paradigm, n)
        for job in ("0", "1")
        for paradigm, n in (("agreement", 4), ("order", 2), ("all", 6))
    ]
    overall = [r["pair_acc"] for r in records if r["paradigm"] == "all"]
    assert overall == pytest.approx([accuracy["0.0"], accuracy["0.1"]])
    assert printed[0] == "| " + " | ".join(modes.eval.eval_pairs.COLUMNS) + " |"
    table = result["configurations"].splitlines()
    assert table[0].startswith("| model.dropout | n | failed | pair_acc | vs_best |")
    best, other = sorted(accuracy, key=accuracy.__getitem__, reverse=True)
    rows = {line.split(" | ")[0].removeprefix("| "): line for line in table[2:]}
    assert rows[best].startswith(f"| {best} | 1 | 0 | {accuracy[best]:.4f} | best |")
    behind = accuracy[other] - accuracy[best]
    assert rows[other].startswith(f"| {other} | 1 | 0 | {accuracy[other]:.4f} | {behind:.4f} |")
    assert _records(sweep / "eval.jsonl") == records


def test_records_from_before_weights_and_precision_were_named_are_trained_float32() -> None:
    """A re-run replaces a record written before eval.weights (the trained weights) and
    before records named their precision (float32)."""
    old = {"checkpoint": "run/checkpoints/best.ckpt", "data": "held.txt", "split": "all"}
    new = {**old, "weights": "trained", "precision": "32-true"}
    assert modes.eval._identity(old) == modes.eval._identity(new)
    assert modes.eval._identity({**old, "weights": "untrained"}) != modes.eval._identity(new)
    assert modes.eval._identity({**old, "precision": "bf16-mixed"}) != modes.eval._identity(new)


def test_an_explicit_source_decides_even_beside_a_reset_key_of_another_kind() -> None:
    """``data.source=hub data.name=org/set data.path=null``: the hub set, though data.path
    and data.name on their own would name two kinds."""
    trained = DataConfig(path="train.txt")
    asked = DataConfig(source="hub", name="org/set")
    chosen = data_to_evaluate(trained, asked, ["data.source", "data.name", "data.path"])
    assert (chosen.cfg.source, chosen.cfg.name, chosen.cfg.path, chosen.whole) == (
        "hub",
        "org/set",
        None,
        True,
    )
