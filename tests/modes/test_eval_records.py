"""``mode=eval``'s records (modes/eval.py) from checkpoints written here without training (an
untrained tiny network and a character tokenizer: a second, not a training run), against
recounts from the network's logits: every field of a decoder's and an encoder's record, the
checkpoints a run or sweep directory gives, the stride's defaults and refusals, and what
identifies a record. Each test kills mutants that the fast eval tests leave alive
(``python -m tools.mutation --module modes/eval.py``)."""

from __future__ import annotations

import contextlib
import io
import json
import math
import shutil
from dataclasses import replace
from pathlib import Path

import lightning as L
import pytest
import torch

import modes.eval
from analysis.records import write_metrics
from analysis.summary import by_configuration
from conf.hydra_runtime import parse_settings
from conf.schema import OptimConfig, Settings
from data.config import DataConfig
from data.tokenizer import special_tokens_of, train_tokenizer
from tests.conftest import compose_config
from tests.corpora import make_paragraphs
from tests.tiny_models import tiny_config
from training.task import task_class

WINDOW = 16
OPTIM = OptimConfig(
    lr=1e-3, weight_decay=0.1, beta1=0.9, beta2=0.95, warmup_steps=1, min_lr_ratio=0.1
)


def _checkpoint(path: Path, arch: str, paragraphs: list[str], step: int | None = 7) -> Path:
    """An untrained tiny ``arch`` with a character tokenizer of ``paragraphs``, saved as a
    training run saves its checkpoints (state_dict, hyper_parameters, global_step; none
    when ``step`` is None)."""
    tokenizer = train_tokenizer("char", [paragraphs], 300)
    torch.manual_seed(0)
    task = task_class(arch)(
        model_config=tiny_config(
            arch, vocab_size=tokenizer.get_vocab_size(with_added_tokens=True), max_seq_len=WINDOW
        ),
        optim_config=OPTIM,
        tokenizer_json=tokenizer.to_str(),
        data_config=DataConfig(tokenizer="char"),
        chars_per_token={},
        total_steps=10,
    )
    path.parent.mkdir(parents=True, exist_ok=True)
    payload = {"state_dict": task.state_dict(), "hyper_parameters": dict(task.hparams)}
    torch.save({**payload, **({} if step is None else {"global_step": step})}, path)
    return path


class _Scored(L.Callback):
    """Counts the evaluations a Trainer ran with it."""

    def __init__(self) -> None:
        self.count = 0

    def on_validation_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.count += 1

    def on_test_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.count += 1


def eval_settings(target: Path, tmp_path: Path, *overrides: str) -> Settings:
    """``mode=eval`` on ``target`` with ``overrides`` recorded as Hydra records a command
    line's."""
    cfg = compose_config("mode=eval", f"ckpt_path={target}", f"output_dir={tmp_path}", *overrides)
    return replace(parse_settings(cfg), overrides=dict(o.split("=", 1) for o in overrides))


def _evaluate(target: Path, tmp_path: Path, *overrides: str, printed: list | None = None):
    """``modes.eval.run`` with ``eval_settings`` and a callback that must see every
    evaluation; what it prints goes to ``printed``."""
    settings = eval_settings(target, tmp_path, *overrides)
    out, scored = io.StringIO(), _Scored()
    with contextlib.redirect_stdout(out):
        result = modes.eval.run(settings, [scored])
    assert scored.count == len(result["results"])
    if printed is not None:
        printed.extend(out.getvalue().splitlines())
    return result


def _windows_recount(
    ckpt: Path, paragraphs: list[str], stride: int, head_mask: torch.Tensor | None = None
) -> dict[str, float]:
    """Loss, accuracy and counts of the decoder in ``ckpt`` over the paragraphs as one stream
    (each followed by EOS), in windows of WINDOW targets sliding by ``stride``: the first
    window scores all its targets, the others their last ``stride``; ``head_mask`` [L, H]:
    the heads at 0 gated off."""
    from tokenizers import Tokenizer

    from training.checkpoint import load_checkpoint

    loaded = load_checkpoint(ckpt)
    tokenizer = Tokenizer.from_str(loaded.tokenizer_json)
    eos = special_tokens_of(tokenizer).eos_id
    stream = [t for p in paragraphs for t in (*tokenizer.encode(p).ids, eos)]
    nll, correct, scored, start = 0.0, 0, 0, 0
    with torch.no_grad():
        while start + WINDOW + 1 <= len(stream):
            block = torch.tensor(stream[start : start + WINDOW + 1])
            count = WINDOW if start == 0 else stride
            logits = loaded.model(block[None, :-1], head_mask=head_mask)[0, -count:].double()
            targets = block[1:][-count:]
            nll -= torch.log_softmax(logits, -1).gather(-1, targets[:, None]).sum().item()
            correct += int((logits.argmax(-1) == targets).sum())
            scored += count
            start += stride
    characters = sum(len(p) + 1 for p in paragraphs)
    utf8_bytes = sum(len(p.encode()) + 1 for p in paragraphs)  # one separator a document
    loss = nll / scored
    return {
        "loss": loss,
        "acc": correct / scored,
        "bpc": loss / math.log(2) / (characters / len(stream)),
        "bpb": loss / math.log(2) / (utf8_bytes / len(stream)),
        "bytes": utf8_bytes,
        "tokens_scored": scored,
        "tokens": len(stream),
        "characters": characters,
    }


@pytest.mark.parametrize(("stride", "split"), [(None, "validation"), (4, "test")])
def test_a_decoder_record_is_the_recount_of_its_windows(tmp_path: Path, stride, split) -> None:
    """Scored as the validation or the test split (Trainer.validate or .test): the same
    text, so the same record; the table printed, then where the record went."""
    paragraphs = make_paragraphs(6)
    ckpt = _checkpoint(tmp_path / "run" / "checkpoints" / "best.ckpt", "decoder", paragraphs)
    held = tmp_path / "held.txt"
    held.write_text("\n\n".join(paragraphs) + "\n")
    asked = [f"data.path={held}", f"data.split={split}"]
    asked += [f"eval.stride={stride}"] if stride else []
    printed: list[str] = []
    result = _evaluate(ckpt, tmp_path, *asked, printed=printed)
    (record,) = result["results"]
    expected = _windows_recount(ckpt, paragraphs, stride or WINDOW)
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
        "provenance": record["provenance"],  # tests/test_provenance.py checks its fields
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
    ckpt = _checkpoint(tmp_path / "best.ckpt", "encoder", paragraphs, step=None)
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
        ckpt = _checkpoint(sweep / str(job) / "checkpoints" / "best.ckpt", "decoder", paragraphs)
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
    assert modes.eval._stride(None, "decoder", WINDOW) == WINDOW
    assert modes.eval._stride(3, "decoder", WINDOW) == 3
    assert modes.eval._stride(None, "encoder", WINDOW) is None
    with pytest.raises(ValueError, match=r"eval.stride=17 must be between 1 and"):
        modes.eval._stride(WINDOW + 1, "decoder", WINDOW)


def test_a_record_is_identified_by_what_was_scored_and_how() -> None:
    record = {key: f"{key}-value" for key in modes.eval.IDENTITY}
    same = {**record, "loss": 1.0, "step": 9}  # the results do not identify a record
    assert modes.eval._identity(record) == modes.eval._identity(same)
    for key in modes.eval.IDENTITY:
        assert modes.eval._identity({**record, key: "other"}) != modes.eval._identity(record)


def test_a_sweep_table_has_the_loss_then_the_other_metrics_and_names_a_damaged_run(
    tmp_path: Path, capsys
) -> None:
    """``by_configuration``: seeds as replicates, the other metrics as means; a run whose
    metrics.json is damaged is named in one warning and grouped without its settings."""
    rows = []
    for job, (heads, seed, loss) in enumerate((("2", "1", 2.0), ("2", "2", 2.2), ("4", "1", 3.0))):
        run_dir = tmp_path / str(job)
        write_metrics(run_dir, {"overrides": {"model.num_heads": heads, "seed": seed}})
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
