"""``heads.prune`` in ``mode=eval`` (features/heads/pruning.py through the core's scoring hook):
the heads it gates off (named, or the least important fraction, never a layer's last head) in
every record and in the table, the loss recounted from the network's logits with those heads
at 0, each checkpoint read once; and the modes that do not read the setting refuse it."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import pytest
import torch

import modes.eval
from conf.hydra_runtime import parse_settings
from tests.conftest import compose_config
from tests.corpora import make_paragraphs
from tests.evaluation_helpers import (
    WINDOW,
    Calls,
    eval_settings,
    held_text,
    records_of,
    run_eval,
    untrained_checkpoint,
    windows_recount,
)

LAYERS, HEADS = 2, 4  # tests/tiny_models.py's tiny_config


def _mask_without(heads: Sequence[tuple[int, int]]) -> torch.Tensor:
    mask = torch.ones(LAYERS, HEADS)
    for layer, head in heads:
        mask[layer, head] = 0.0
    return mask


def test_named_heads_are_gated_off_in_every_record_and_each_checkpoint_is_read_once(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Over a sweep of two runs: the loss is the recount with those heads at 0, the record
    and the table name them (in the order given), and no checkpoint is read twice."""
    paragraphs = make_paragraphs(6)
    sweep = tmp_path / "sweep"
    found = [
        untrained_checkpoint(sweep / job / "checkpoints" / "best.ckpt", "decoder", paragraphs)
        for job in ("0", "1")
    ]
    read = Calls(then=modes.eval.read_checkpoint)
    monkeypatch.setattr(modes.eval, "read_checkpoint", read)
    named = ["1:3", "0:0", "0:1", "0:2", "1:1", "1:2"]  # all but a head of each layer
    held = held_text(tmp_path, paragraphs)
    settings = eval_settings(
        sweep, tmp_path, f"data.path={held}", f"heads.prune=[{','.join(named)}]"
    )
    result, printed = run_eval(settings)
    assert [str(path) for (path,) in read.calls] == [str(path) for path in found]
    gated = [(int(name[0]), int(name[2])) for name in named]
    expected = windows_recount(found[0], paragraphs, WINDOW, _mask_without(gated))
    whole = windows_recount(found[0], paragraphs, WINDOW)
    assert whole["loss"] != pytest.approx(expected["loss"], rel=1e-4)  # the gate matters
    records = result["results"]
    for record, ckpt in zip(records, found, strict=True):
        assert record["checkpoint"] == str(ckpt.resolve())
        assert record["heads_prune"] == record["heads_pruned"] == named
        assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)
    columns = (*modes.eval.COLUMNS, "heads_prune", "heads_pruned")
    assert printed[0] == "| " + " | ".join(columns) + " |"
    assert printed[2].endswith(f" | {named} | {named} |")
    assert records_of(sweep / "eval.jsonl") == records


def test_a_fraction_of_heads_gates_off_that_many_never_a_layers_last(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(6)
    ckpt = untrained_checkpoint(tmp_path / "run" / "best.ckpt", "decoder", paragraphs)
    held = held_text(tmp_path, paragraphs)
    result, _ = run_eval(eval_settings(ckpt, tmp_path, f"data.path={held}", "heads.prune=0.5"))
    (record,) = result["results"]
    assert record["heads_prune"] == 0.5
    pruned = [tuple(int(i) for i in name.split(":")) for name in record["heads_pruned"]]
    assert len(set(pruned)) == len(pruned) == round(0.5 * LAYERS * HEADS)
    for layer in range(LAYERS):  # each layer keeps a head
        assert sum(gone == layer for gone, _ in pruned) < HEADS
    expected = windows_recount(ckpt, paragraphs, WINDOW, _mask_without(pruned))
    assert record["loss"] == pytest.approx(expected["loss"], rel=1e-5)


@pytest.mark.parametrize(
    ("mode", "setting", "reason"),
    [
        ("heads", "heads.prune=0.5", "mode=heads analyses every head and draws the prune curve"),
        ("generate", "heads.prune=0.5", "mode=generate does not read it"),
        ("eval", "heads.log_every=5", "mode=eval does not read it"),
    ],
)
def test_a_heads_setting_is_refused_by_the_modes_that_do_not_read_it(
    tmp_path: Path, mode: str, setting: str, reason: str
) -> None:
    """Refused, not ignored: pairs and harness tasks, say, score the checkpoint whole."""
    ckpt = untrained_checkpoint(tmp_path / "best.ckpt", "decoder", make_paragraphs(6))
    with pytest.raises(ValueError, match=reason) as error:
        eval_settings(ckpt, tmp_path, setting, f"mode={mode}")
    key = setting.partition("=")[0]
    assert str(error.value).endswith(f"drop {key}")


@pytest.mark.parametrize(
    "mode", ["train", "finetune", "generate", "export", "attention", "heads", "report"]
)
def test_heads_settings_are_refused_where_the_mode_does_not_read_them(mode) -> None:
    cfg = compose_config(f"mode={mode}", "ckpt_path=x.ckpt", "output_dir=o", "heads.prune=0.5")
    with pytest.raises(ValueError) as err:
        parse_settings(cfg)
    message = str(err.value)
    assert "\n" not in message and message.startswith(
        "heads.prune is for mode=eval (score with those heads gated off); "
    )
    assert message.endswith(": drop heads.prune")
    assert parse_settings(
        compose_config("mode=eval", "ckpt_path=x", "output_dir=o", "heads.prune=0.5")
    )
