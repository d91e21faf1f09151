"""``mode=eval``'s records (modes/eval.py) from checkpoints written without training
(tests/evaluation_helpers.py), against recounts from the network's logits: every field of a
decoder's and an encoder's record, the checkpoints a run or sweep directory gives, the stride's
defaults and refusals, what identifies a record, and a sweep's table."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from pathlib import Path

import pytest

import modes.eval
from analysis.run_record import write_record
from analysis.summary import by_configuration
from tests.corpora import make_paragraphs
from tests.evaluation_helpers import (
    WINDOW,
    EvaluationCounter,
    eval_settings,
    untrained_checkpoint,
    windows_recount,
)


def _evaluate(target: Path, tmp_path: Path, *overrides: str, printed: list | None = None):
    """``modes.eval.run`` with ``eval_settings`` and a callback that must see every
    evaluation; what it prints goes to ``printed``."""
    settings = eval_settings(target, tmp_path, *overrides)
    out, scored = io.StringIO(), EvaluationCounter()
    with contextlib.redirect_stdout(out):
        result = modes.eval.run(settings, [scored])
    assert scored.count == len(result["results"])
    if printed is not None:
        printed.extend(out.getvalue().splitlines())
    return result


@pytest.mark.parametrize(("stride", "split"), [(None, "validation"), (4, "test")])
def test_a_decoder_record_is_the_recount_of_its_windows(tmp_path: Path, stride, split) -> None:
    """Scored as the validation or the test split (Trainer.validate or .test): the same
    text, so the same record; the table printed, then where the record went."""
    paragraphs = make_paragraphs(6)
    ckpt = untrained_checkpoint(
        tmp_path / "run" / "checkpoints" / "best.ckpt", "decoder", paragraphs
    )
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    asked = [f"data.path={held}", f"data.split={split}"]
    asked += [f"eval.stride={stride}"] if stride else []
    printed: list[str] = []
    result = _evaluate(ckpt, tmp_path, *asked, printed=printed)
    (record,) = result["results"]
    expected = windows_recount(ckpt, paragraphs, stride or WINDOW)
    assert record == {
        "checkpoint": str(ckpt.resolve()),
        "step": 7,
        "arch": "decoder",
        "data": str(held),
        "data_fingerprint": record["data_fingerprint"],
        "split": "all",
        "stride": stride or WINDOW,  # the default: non-overlapping windows
        "mask_seed": None,
        "tokens": expected["tokens"],
        "tokens_scored": expected["tokens_scored"],
        "characters": expected["characters"],
        "bytes": expected["bytes"],
        "weights": "trained",
        "weights_seed": None,
        "precision": "32-true",  # TINY's
        "loss": pytest.approx(expected["loss"], rel=1e-5),
        "ppl": pytest.approx(math.exp(expected["loss"]), rel=1e-5),
        "bpc": pytest.approx(expected["bpc"], rel=1e-5),
        "bpb": pytest.approx(expected["bpb"], rel=1e-5),
        "acc": pytest.approx(expected["acc"], rel=1e-6),
        "provenance": record["provenance"],  # tests/common/test_provenance.py checks its fields
    }
    assert record["provenance"]["precision"] == "32-true"
    assert "configurations" not in result  # one checkpoint: no sweep table
    eval_jsonl = ckpt.parent / "eval.jsonl"
    assert result["eval_jsonl"] == str(eval_jsonl)
    shown = {c: modes.eval.format_value(record[c]) for c in modes.eval.COLUMNS}
    assert printed == [
        "| " + " | ".join(modes.eval.COLUMNS) + " |",
        "|" + "---|" * len(modes.eval.COLUMNS),
        "| " + " | ".join(str(shown[c]) for c in modes.eval.COLUMNS) + " |",
        "",  # the table ends with a newline
        f"wrote {eval_jsonl}",
    ]
    assert [json.loads(line) for line in eval_jsonl.read_text().splitlines()] == [record]


def test_an_encoder_record_names_its_mask_seed_and_no_stride(tmp_path: Path) -> None:
    paragraphs = make_paragraphs(12)
    ckpt = untrained_checkpoint(tmp_path / "best.ckpt", "encoder", paragraphs, step=None)
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    (record,) = _evaluate(ckpt, tmp_path, f"data.path={held}", "seed=5")["results"]
    # No global_step in the checkpoint: step 0.
    assert (record["step"], record["arch"], record["stride"]) == (0, "encoder", None)
    assert record["mask_seed"] == 5 and 0 < record["tokens_scored"] < record["tokens"]
    assert set(record) >= {"loss", "ppl", "acc"} and "bpc" not in record
    assert record["ppl"] == pytest.approx(math.exp(record["loss"]), rel=1e-5)
    with pytest.raises(ValueError) as error:
        _evaluate(ckpt, tmp_path, f"data.path={held}", "eval.stride=4")
    assert str(error.value) == (
        "eval.stride=4 is for decoders; an encoder scores each example whole (drop eval.stride)"
    )


def test_a_run_directory_gives_its_best_checkpoint_and_a_sweep_every_run_in_job_order(
    tmp_path: Path,
) -> None:
    paragraphs = make_paragraphs(6)
    sweep = tmp_path / "sweep"
    for job in (0, 2, 10):
        ckpt = untrained_checkpoint(
            sweep / str(job) / "checkpoints" / "best.ckpt", "decoder", paragraphs
        )
        (ckpt.parent / "last.ckpt").write_bytes(b"")  # only best.ckpt is evaluated
    run_dir = sweep / "2"
    assert modes.eval.checkpoints_to_evaluate(run_dir) == [run_dir / "checkpoints" / "best.ckpt"]
    found = modes.eval.checkpoints_to_evaluate(sweep)
    assert found == [sweep / job / "checkpoints" / "best.ckpt" for job in ("0", "2", "10")]
    single = sweep / "0" / "checkpoints" / "best.ckpt"
    assert modes.eval.checkpoints_to_evaluate(single) == [single]
    with pytest.raises(FileNotFoundError, match=r"does not exist$"):
        modes.eval.checkpoints_to_evaluate(tmp_path / "missing")
    empty = tmp_path / "sweep" / "0" / "checkpoints"
    with pytest.raises(FileNotFoundError) as error:
        modes.eval.checkpoints_to_evaluate(empty)
    assert str(error.value) == (
        f"no checkpoints/best.ckpt in {empty} or in its run directories; pass a checkpoint "
        "file, a run directory or a sweep directory"
    )
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    shutil.rmtree(sweep / "0")  # two runs are a sweep too
    printed: list[str] = []
    result = _evaluate(sweep, tmp_path, f"data.path={held}", printed=printed)
    assert [r["checkpoint"] for r in result["results"]] == [str(p.resolve()) for p in found[1:]]
    table = result["configurations"]  # the sweep's table, by configuration
    assert table.startswith(
        "| n | failed | loss | vs_best | p_welch | holm | ppl | bpc | bpb | acc |"
    )
    assert printed[5:] == [*table.splitlines(), "", f"wrote {sweep / 'eval.jsonl'}"]
    assert result["eval_jsonl"] == str(sweep / "eval.jsonl")
    with pytest.raises(ValueError, match=rf"position table of {sweep / '2'}"):
        _evaluate(sweep / "2", tmp_path, f"data.path={held}", "model.max_seq_len=64")


def test_the_stride_defaults_to_the_window_and_is_checked_for_decoders() -> None:
    assert modes.eval.eval_stride(None, "decoder", WINDOW) == WINDOW
    assert modes.eval.eval_stride(3, "decoder", WINDOW) == 3
    assert modes.eval.eval_stride(None, "encoder", WINDOW) is None
    with pytest.raises(ValueError, match=r"eval.stride=17 must be between 1 and"):
        modes.eval.eval_stride(WINDOW + 1, "decoder", WINDOW)


def test_a_record_is_identified_by_what_was_scored_and_how() -> None:
    record = {key: f"{key}-value" for key in modes.eval.IDENTITY}
    same = {**record, "loss": 1.0, "step": 9}  # the results do not identify a record
    assert modes.eval.record_identity(record) == modes.eval.record_identity(same)
    for key in modes.eval.IDENTITY:
        assert modes.eval.record_identity({**record, key: "other"}) != modes.eval.record_identity(
            record
        )


def test_a_sweep_table_has_the_loss_then_the_other_metrics_and_names_a_damaged_run(
    tmp_path: Path, capsys
) -> None:
    """``by_configuration``: seeds as replicates, the other metrics as means; a run whose
    metrics.json is damaged is named in one warning and grouped without its settings."""
    rows = []
    for job, (heads, seed, loss) in enumerate((("2", "1", 2.0), ("2", "2", 2.2), ("4", "1", 3.0))):
        run_dir = tmp_path / str(job)
        write_record(run_dir, {"overrides": {"model.num_heads": heads, "seed": seed}})
        ckpt = str(run_dir / "checkpoints" / "best.ckpt")
        rows.append({"checkpoint": ckpt, "loss": loss, "ppl": math.exp(loss), "acc": 0.5})
    damaged = tmp_path / "3"
    damaged.mkdir()
    (damaged / "metrics.json").write_text("{not json")
    rows.append({"checkpoint": str(damaged / "checkpoints" / "best.ckpt"), "loss": 4.0})
    lines = by_configuration(rows, others=modes.eval.METRICS[1:]).splitlines()
    header = (
        "| model.num_heads | n | failed | loss | vs_best | p_welch | holm | ppl | bpc | bpb | acc |"
    )
    assert lines[0] == header
    ppl = (math.exp(2.0) + math.exp(2.2)) / 2
    assert lines[2] == f"| 2 | 2 | 0 | 2.1000 ± 0.1414 | best |  |  | {ppl:.4g} |  |  | 0.5 |"
    assert lines[4].startswith("| None | 1 | 0 | 4.0000 |")  # the damaged run, apart
    (warning,) = capsys.readouterr().err.splitlines()
    assert warning.startswith(f"tinylm: warning: {damaged / 'metrics.json'} is damaged")
    assert warning.endswith(
        "; the run is grouped without its settings (rewrite or delete the file)"
    )
