"""End-to-end tests of the application through ``train.run(cfg)`` and the real entry point."""

from __future__ import annotations

import csv
import json
import re
import shutil
import struct
from pathlib import Path

import pytest
import torch
from tokenizers import Tokenizer

from tests.conftest import ROOT, TINY, train_py
from train import run
from training.checkpoint import load_checkpoint


def _copy_of(run_dir: Path, tmp_path: Path) -> Path:
    """A test's own copy of a shared run directory, for tests that write into it (eval.json,
    attention.png): no test then reads what another left behind."""
    return Path(shutil.copytree(run_dir, tmp_path / "run-copy"))


def _train_losses(run_dir: Path) -> list[float]:
    with open(run_dir / "csv" / "metrics.csv") as f:
        return [float(r["train/loss"]) for r in csv.DictReader(f) if r.get("train/loss")]


def _assert_loss_fell(run_dir: Path, by: float) -> None:
    """Mean of the last two logged losses below the mean of the first two (batches are noisy)."""
    losses = _train_losses(run_dir)
    assert len(losses) >= 4, losses
    assert sum(losses[-2:]) / 2 < sum(losses[:2]) / 2 - by, losses


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, dict]:
    """One tiny decoder run shared by the tests that need a checkpoint."""
    from hydra import compose, initialize_config_dir

    out = tmp_path_factory.mktemp("gpt") / "run"
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*TINY, "logger=csv", f"output_dir={out}"])
    return out, run(cfg)


def test_gpt_trains_and_writes_its_run_dir(gpt_run: tuple[Path, dict]) -> None:
    out, metrics = gpt_run
    _assert_loss_fell(out, by=0.3)
    for name in (
        "checkpoints/best.ckpt",
        "checkpoints/last.ckpt",
        "tokenizer.json",
        "metrics.json",
    ):
        assert (out / name).is_file(), name
    assert metrics["status"] == "completed" and metrics["step"] == 30
    assert 0.0 < metrics["val_acc"] < 1.0  # next-token accuracy
    assert metrics["val_bpc"] > 0 and metrics["val_ppl"] == pytest.approx(
        torch.exp(torch.tensor(metrics["val_loss"])).item(), rel=1e-4
    )
    saved = json.loads((out / "metrics.json").read_text())
    assert saved["best_val_loss"] == pytest.approx(metrics["best_val_loss"])


def test_checkpoint_is_self_contained_and_weights_only(gpt_run: tuple[Path, dict]) -> None:
    out, _ = gpt_run
    checkpoint = torch.load(out / "checkpoints/last.ckpt", weights_only=True)
    hparams = checkpoint["hyper_parameters"]
    assert hparams["model_config"]["arch"] == "decoder"
    assert json.loads(hparams["tokenizer_json"])["model"]  # a full tokenizer, not a path


def test_bert_trains_and_fills_masks(make_cfg) -> None:
    # MLM has ~15% targets per example: a larger batch keeps the loss curve readable.
    cfg = make_cfg(
        "model=bert",
        "logger=csv",
        "data.batch_size=32",
        "trainer.max_steps=60",
        "trainer.val_check_interval=30",
    )
    metrics = run(cfg)
    out = Path(cfg.output_dir)
    _assert_loss_fell(out, by=0.25)
    assert metrics["arch"] == "encoder"
    assert 0.0 <= metrics["val_acc"] <= 1.0
    best = out / "checkpoints/best.ckpt"
    assert best.is_file()

    # mode=generate on an encoder: five candidates for each [MASK], those of fill_mask.
    prompt = "The [MASK] statement is [MASK]."
    text = run(make_cfg("mode=generate", f"ckpt_path={best}", f"prompt='{prompt}'"))["text"]
    loaded = load_checkpoint(best)
    tokenizer = Tokenizer.from_str(loaded.tokenizer_json)
    ids = [tokenizer.token_to_id(t) for t in ("[CLS]", "[SEP]", "[MASK]")]
    # As the encoder was trained: [CLS] text [SEP].
    inputs = torch.tensor([[ids[0], *tokenizer.encode(prompt).ids, ids[1]]])
    expected = loaded.model.fill_mask(inputs, ids[2], top_k=5)[0]
    assert len(expected) == 2 and all(len(p.token_ids) == 5 for p in expected)
    assert text.splitlines() == [
        prompt,
        *(
            f"  [MASK] #{number}: "
            + ", ".join(
                f"{tokenizer.id_to_token(i)!r} {p:.2f}"
                for i, p in zip(prediction.token_ids, prediction.probs, strict=True)
            )
            for number, prediction in enumerate(expected, start=1)
        ),
    ]
    with pytest.raises(ValueError, match=r"prompt='The end\.' has no \[MASK\] token to fill"):
        run(make_cfg("mode=generate", f"ckpt_path={best}", "prompt='The end.'"))


def test_resume_continues_at_saved_step(gpt_run: tuple[Path, dict], make_cfg) -> None:
    out, _ = gpt_run
    last = out / "checkpoints/last.ckpt"
    cfg = make_cfg("logger=csv", f"ckpt_path={last}", "trainer.max_steps=40")
    metrics = run(cfg)
    assert metrics["step"] == 40
    with open(Path(cfg.output_dir) / "csv" / "metrics.csv") as f:
        steps = [int(r["step"]) for r in csv.DictReader(f) if r.get("train/loss")]
    assert min(steps) >= 30, steps  # nothing before the saved step was trained again


def test_eval_writes_eval_jsonl(gpt_run: tuple[Path, dict], make_cfg, tmp_path: Path) -> None:
    out = _copy_of(gpt_run[0], tmp_path)
    best = out / "checkpoints/best.ckpt"
    result = run(make_cfg("mode=eval", f"ckpt_path={best}"))
    row = result["results"][0]
    assert row["split"] == "validation" and row["loss"] > 0
    last = json.loads((best.parent / "eval.jsonl").read_text().splitlines()[-1])
    assert last["loss"] == pytest.approx(row["loss"])
    test_row = run(make_cfg("mode=eval", f"ckpt_path={best}", "data.split=test"))["results"][0]
    assert test_row["split"] == "test" and test_row["loss"] != row["loss"]


def test_greedy_generation_continues_the_prompt_the_same_way_twice(
    gpt_run: tuple[Path, dict], make_cfg, tmp_path: Path
) -> None:
    out = _copy_of(gpt_run[0], tmp_path)
    best = out / "checkpoints/best.ckpt"
    text = run(
        make_cfg("mode=generate", f"ckpt_path={best}", "prompt=The function", "temperature=0")
    )["text"]
    assert text.startswith("The function") and len(text) > len("The function")
    again = run(
        make_cfg("mode=generate", f"ckpt_path={best}", "prompt=The function", "temperature=0")
    )["text"]
    assert again == text  # greedy is deterministic


def test_bad_override_prints_a_message_not_a_traceback(tmp_path: Path) -> None:
    proc = train_py(*TINY, "model.num_heads=3", f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert proc.returncode == 1
    assert "valid head counts" in proc.stderr
    assert "Traceback" not in proc.stderr


def _wandb_run_records(run_dir: Path) -> list:
    """The records of a W&B offline run file (``run-ID.wandb``, what ``wandb sync`` uploads).

    The file is a LevelDB-style log: a 7-byte header, then 32 KiB blocks of chunks, each with
    a 7-byte header (crc32, length, type: 1 whole record, 2 first, 3 middle, 4 last part);
    a block's tail shorter than a chunk header is padding. Each record is a protobuf.
    """
    from wandb.proto.wandb_internal_pb2 import Record

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    data = path.read_bytes()
    assert data[:4] == b":W&B"
    records, parts, pos, block = [], b"", 7, 32768
    while pos + 7 <= len(data):
        room = block - pos % block
        _, length, kind = struct.unpack("<IHB", data[pos : pos + 7])
        if room < 7 or kind == 0:  # padding to the end of the block
            pos += room
            continue
        parts += data[pos + 7 : pos + 7 + length]
        pos += 7 + length
        if kind in (1, 4):
            record = Record()
            record.ParseFromString(parts)
            records.append(record)
            parts = b""
    return records


def test_multirun_sweep_writes_summary_with_failed_run(
    tmp_path: Path, make_cfg, monkeypatch
) -> None:
    # Unset, so the configured default (logger.mode=offline) decides, as for a user; and an
    # unreachable server, so any attempt to go online fails rather than hangs.
    monkeypatch.delenv("WANDB_MODE", raising=False)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    sweep = tmp_path / "sweep"
    overrides = [
        *TINY,
        "logger=wandb",
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "model.num_heads=2,3",
        "model.dropout=0.0,0.1",
    ]
    proc = train_py("-m", *overrides, f"hydra.sweep.dir={sweep}", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-3000:]
    with open(sweep / "runs.csv") as f:
        rows = list(csv.DictReader(f))
    assert len(rows) == 4
    by_heads = {(r["model.num_heads"], r["model.dropout"]): r for r in rows}
    for job, dropout in ((0, "0.0"), (1, "0.1")):
        completed = by_heads[("2", dropout)]
        stored = json.loads((sweep / str(job) / "metrics.json").read_text())
        assert completed["status"] == stored["status"] == "completed"
        assert float(completed["best_val_loss"]) == pytest.approx(stored["best_val_loss"], rel=5e-4)
        failed = by_heads[("3", dropout)]
        assert failed["status"] == "failed" and "num_heads=3" in failed["error"]
        # The job's W&B offline run: the sweep's group, the job's overrides and settings.
        (run_record,) = [r.run for r in _wandb_run_records(sweep / str(job)) if r.HasField("run")]
        config = {item.key: json.loads(item.value_json) for item in run_record.config.update}
        assert run_record.run_group == sweep.name
        # Every key of the command line, with this job's values of the swept ones.
        assert list(config["overrides"]) == list(dict.fromkeys(o.split("=")[0] for o in overrides))
        swept = {"model.num_heads": "2", "model.dropout": dropout}
        assert swept.items() <= config["overrides"].items()
        assert {"model.num_heads=2", f"model.dropout={dropout}"} <= set(
            run_record.display_name.split(",")
        )
        assert config["settings"]["model"]["num_heads"] == 2
        assert config["settings"]["model"]["dropout"] == float(dropout)
        assert config["settings"]["logger"]["mode"] == "offline"
    with open(sweep / "summary.csv") as f:  # one row per configuration
        configs = {(r["model.num_heads"], r["model.dropout"]): r for r in csv.DictReader(f)}
    for dropout in ("0.0", "0.1"):
        assert (configs[("2", dropout)]["n"], configs[("2", dropout)]["failed"]) == ("1", "0")
        assert (configs[("3", dropout)]["n"], configs[("3", dropout)]["failed"]) == ("0", "1")
    summary = (sweep / "summary.md").read_text()
    assert "## Configurations" in summary and "## Runs" in summary
    assert (sweep / "heatmap_val_loss.png").read_bytes()[:4] == b"\x89PNG"
    # Each run has its own directory and checkpoints.
    assert len(list(sweep.glob("*/checkpoints/best.ckpt"))) == 2
    # mode=eval on the sweep directory evaluates every run's best checkpoint into one table.
    rows = run(make_cfg("mode=eval", f"ckpt_path={sweep}"))["results"]
    assert [Path(r["checkpoint"]).parts[-3] for r in rows] == ["0", "1"]
    assert [json.loads(line) for line in (sweep / "eval.jsonl").read_text().splitlines()] == rows


def test_wandb_offline_run_touches_no_network(make_cfg, monkeypatch) -> None:
    # An unreachable server: any attempt to go online would fail, not hang. WANDB_MODE unset:
    # the configured default, logger.mode=offline, is what keeps it offline. (Its records are
    # read back in the multirun test: wandb writes them out by the end of the process.)
    monkeypatch.setenv("WANDB_BASE_URL", "http://127.0.0.1:9")
    monkeypatch.delenv("WANDB_MODE", raising=False)
    cfg = make_cfg("logger=wandb", "trainer.max_steps=5", "trainer.val_check_interval=5")
    metrics = run(cfg)
    assert metrics["status"] == "completed"
    assert list(Path(cfg.output_dir).glob("wandb/offline-run-*")), "no offline wandb run dir"


def test_experiment_preset_overrides_top_level_defaults() -> None:
    """A preset must win over config.yaml's own keys (optim), not only over other groups."""
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=["experiment=shakespeare_char"])
    assert (cfg.optim.warmup_steps, cfg.optim.beta2, cfg.optim.lr) == (100, 0.99, 1e-3)
    assert (
        cfg.model.num_layers,
        cfg.model.num_heads,
        cfg.model.hidden_size,
        cfg.model.max_seq_len,
        cfg.model.dropout,
    ) == (4, 4, 128, 64, 0.0)
    assert (cfg.data.source, cfg.data.tokenizer, cfg.data.batch_size) == ("files", "char", 12)
    assert (cfg.trainer.max_steps, cfg.trainer.val_check_interval) == (2000, 250)


@pytest.mark.parametrize(
    ("overrides", "optim", "position"),
    [
        ([], "muon", "rope"),  # GPT's default (conf/model/gpt.yaml selects the optimiser)
        (["model=bert"], "adamw", "learned"),
        (["optim=adamw"], "adamw", "rope"),  # the command line wins over the model's choice
        (["model=bert", "optim=muon"], "muon", "learned"),
        (["experiment=shakespeare_char"], "adamw", "learned"),  # the classic recipe
        (["experiment=shakespeare_char", "optim=muon", "model.position=rope"], "muon", "rope"),
        (["experiment=shakespeare_char_fast"], "muon", "rope"),
    ],
)
def test_each_model_and_preset_composes_its_optimiser_and_positions(
    overrides: list[str], optim: str, position: str
) -> None:
    from hydra import compose, initialize_config_dir

    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=overrides)
    assert (cfg.optim.kind, cfg.model.position) == (optim, position)
    # Each optimiser brings its own fields: Muon's are absent from an AdamW run's config.
    assert ("muon_lr" in cfg.optim) == (optim == "muon")


def test_eval_command_line_split_override(gpt_run: tuple[Path, dict], tmp_path: Path) -> None:
    """Through train.py, where Hydra records the overrides (compose() records none)."""
    out = _copy_of(gpt_run[0], tmp_path)
    best = out / "checkpoints/best.ckpt"
    proc = train_py(
        "mode=eval",
        f"ckpt_path={best}",
        "data.split=test",
        f"hydra.run.dir={tmp_path}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-2000:]
    last = json.loads((best.parent / "eval.jsonl").read_text().splitlines()[-1])
    assert last["split"] == "test"


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["data=wikitext2"], r"Salesforce/wikitext"),  # the Hub while offline
        (["optim.lr=fast"], r"optim.lr='fast' has type str; expected float"),
        (["max_new_tokens=abc"], r"max_new_tokens='abc' has type str; expected int"),
    ],
)
def test_more_bad_input_gives_one_message(
    tmp_path: Path, overrides: list[str], message: str
) -> None:
    proc = train_py(*TINY, *overrides, f"hydra.run.dir={tmp_path}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert re.search(message, proc.stderr), proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
