"""What ``mode=eval`` (modes/eval.py) does beyond scoring text with a language model: the
table and the loss, the untrained baseline's weights, each checkpoint read once, and the
defaults that identify old records; and (data/evaluation.py) an explicit ``data.source``
beside a reset key of another kind.

Checkpoints are tests/test_eval_edges.py's untrained tiny networks; losses are recounted here
from the network's logits. The tests answer the survivors of
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
from conf.schema import EvalConfig, Settings
from data.config import DataConfig
from data.evaluation import data_to_evaluate
from models.config import ModelConfig
from models.transformer import build_model
from tests.corpora import make_paragraphs
from tests.test_eval_edges import WINDOW, _checkpoint, _windows_recount, eval_settings

LAYERS, HEADS = 2, 4  # tests/tiny_models.py's tiny_config


def run_eval(settings: Settings, callbacks: Sequence[Any] = ()) -> tuple[dict[str, Any], list[str]]:
    """``modes.eval.run``'s result and the lines it printed."""
    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        result = modes.eval.run(settings, callbacks)
    return result, out.getvalue().splitlines()


def held_text(tmp_path: Path, paragraphs: list[str]) -> Path:
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


def records_of(eval_jsonl: Path) -> list[dict[str, Any]]:
    return [json.loads(line) for line in eval_jsonl.read_text().splitlines()]


class Calls:
    """A stand-in for a command: records the arguments of each call, then returns
    ``returned``, or what ``then`` (the real command, to spy on it) returns for them."""

    def __init__(self, returned: Any = None, then: Callable[..., Any] | None = None) -> None:
        self.calls: list[tuple[Any, ...]] = []
        self.returned = returned
        self.then = then

    def __call__(self, *args: Any) -> Any:
        self.calls.append(args)
        return self.then(*args) if self.then else self.returned


def test_untrained_weights_are_drawn_from_the_seed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paragraphs = make_paragraphs(6)
    ckpt = _checkpoint(tmp_path / "run" / "best.ckpt", "decoder", paragraphs)
    fresh = _with_weights_drawn_from(ckpt, 3, tmp_path / "fresh" / "best.ckpt")
    stamped = Calls(then=modes.eval.provenance)
    monkeypatch.setattr(modes.eval, "provenance", stamped)
    held = held_text(tmp_path, paragraphs)
    settings = eval_settings(
        ckpt, tmp_path, f"data.path={held}", "eval.weights=untrained", "seed=3"
    )
    result, printed = run_eval(settings)
    (record,) = result["results"]
    expected = _windows_recount(fresh, paragraphs, WINDOW)
    trained = _windows_recount(ckpt, paragraphs, WINDOW)
    assert not math.isclose(expected["loss"], trained["loss"], rel_tol=1e-4)
    assert (record["weights"], record["weights_seed"]) == ("untrained", 3)
    assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    assert "heads_prune" not in record and "heads_pruned" not in printed[0]
    assert stamped.calls == [("32-true", settings.trainer.accelerator)]


def test_records_from_before_weights_and_precision_were_named_are_trained_float32() -> None:
    """A re-run replaces a record written before eval.weights (the trained weights) and
    before records named their precision (float32)."""
    old = {"checkpoint": "run/checkpoints/best.ckpt", "data": "held.txt", "split": "all"}
    new = {**old, "weights": "trained", "precision": "32-true"}
    assert modes.eval._identity(old) == modes.eval._identity(new)
    assert modes.eval._identity({**old, "weights": "untrained"}) != modes.eval._identity(new)
    assert modes.eval._identity({**old, "precision": "bf16-mixed"}) != modes.eval._identity(new)


def test_eval_weights_names_its_choices() -> None:
    with pytest.raises(ValueError, match=r"eval.weights=random is unknown; choose"):
        EvalConfig(weights="random")


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
