"""What ``mode=eval`` (modes/eval.py) does beyond scoring text with a language model: the
table and the loss, the untrained baseline's weights, each checkpoint read once, and the
defaults that identify old records; and (data/evaluation.py) an explicit ``data.source``
beside a reset key of another kind.

Checkpoints are tests/evaluation_helpers.py's untrained tiny networks; losses are recounted
here from the network's logits."""

from __future__ import annotations

import math
from pathlib import Path

import pytest

import modes.eval
from conf.schema import EvalConfig
from data.config import DataConfig
from data.evaluation import data_to_evaluate
from tests.corpora import make_paragraphs
from tests.evaluation_helpers import (
    WINDOW,
    Calls,
    eval_settings,
    held_text,
    run_eval,
    untrained_checkpoint,
    windows_recount,
    with_weights_drawn_from,
)

LAYERS, HEADS = 2, 4  # tests/tiny_models.py's tiny_config


def test_untrained_weights_are_drawn_from_the_seed_and_named(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    paragraphs = make_paragraphs(6)
    ckpt = untrained_checkpoint(tmp_path / "run" / "best.ckpt", "decoder", paragraphs)
    fresh = with_weights_drawn_from(ckpt, 3, tmp_path / "fresh" / "best.ckpt")
    stamped = Calls(then=modes.eval.provenance)
    monkeypatch.setattr(modes.eval, "provenance", stamped)
    held = held_text(tmp_path, paragraphs)
    settings = eval_settings(
        ckpt, tmp_path, f"data.path={held}", "eval.weights=untrained", "seed=3"
    )
    result, printed = run_eval(settings)
    (record,) = result["results"]
    expected = windows_recount(fresh, paragraphs, WINDOW)
    trained = windows_recount(ckpt, paragraphs, WINDOW)
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
    assert modes.eval.record_identity(old) == modes.eval.record_identity(new)
    assert modes.eval.record_identity(
        {**old, "weights": "untrained"}
    ) != modes.eval.record_identity(new)
    assert modes.eval.record_identity(
        {**old, "precision": "bf16-mixed"}
    ) != modes.eval.record_identity(new)


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
