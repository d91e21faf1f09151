"""``mode=heads``: one checkpoint's heads.json and figures, a sweep grouped by configuration,
and its bad input (one line each)."""

from __future__ import annotations

import csv
import json
import math
import re
import shutil
import statistics
from dataclasses import replace
from pathlib import Path

import pytest

import features.heads.command
import modes.eval
import training.precision
from analysis.run_record import write_record
from conf.hydra_runtime import parse_settings
from conf.schema import Settings
from features.heads.config import HeadsConfig
from tests.conftest import compose_config
from tests.modes.test_modes import checkpoint_reads
from training.precision import native_precision


def _settings(ckpt: Path, tmp_path: Path, *overrides: str):
    cfg = compose_config(
        "mode=heads",
        f"ckpt_path={ckpt}",
        "model.max_seq_len=64",  # the tiny checkpoints' context
        f"output_dir={tmp_path / 'out'}",
        *overrides,
    )
    return parse_settings(cfg)


@pytest.fixture(scope="module")
def analysed(tiny_checkpoints, tmp_path_factory) -> dict[str, tuple[Path, dict]]:
    """arch -> (checkpoint, mode=heads' result) on a copy of the session's tiny runs."""
    found = {}
    for arch, ckpt in tiny_checkpoints.items():
        where = tmp_path_factory.mktemp(f"heads-{arch}")
        shutil.copytree(ckpt.parent.parent, where / "run")
        copy = where / "run" / "checkpoints" / ckpt.name
        found[arch] = copy, features.heads.command.run(_settings(copy, where))
    return found


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_heads_json_holds_every_head_and_the_prune_curve(analysed, arch: str) -> None:
    ckpt, result = analysed[arch]
    stored = json.loads((ckpt.parent / "heads.json").read_text())
    assert stored == json.loads(json.dumps(result))
    layers, heads = stored["num_layers"], stored["num_heads"]
    assert [(r["layer"], r["head"]) for r in stored["heads"]] == [
        (layer, head) for layer in range(layers) for head in range(heads)
    ]
    assert stored["tokens"] > 0 and stored["batches"] >= 1
    curve = stored["prune_curve"]
    assert curve[0]["removed"] == [] and curve[0]["loss"] == stored["base_loss"]
    assert len(curve[-1]["removed"]) == layers * (heads - 1)
    for name in ("heads.png", "prune_curve.png"):
        assert (ckpt.parent / name).stat().st_size > 0


def _with_precision(
    mode: str, ckpt: Path, tmp_path: Path, precision: str | None, given: bool
) -> Settings:
    """mode's settings with ``precision`` composed in (None: TINY's 32-true). compose() records
    no override, so a composed precision reads as the preset's (trainer=cpu's bf16-mixed, which
    native_precision keeps only on a CPU with native bfloat16); ``given`` adds it to the
    command line's overrides, where it is kept on any CPU."""
    extra = () if precision is None else (f"trainer.precision={precision}",)
    settings = parse_settings(
        compose_config(
            f"mode={mode}",
            f"ckpt_path={ckpt}",
            "model.max_seq_len=64",
            f"output_dir={tmp_path / 'out'}",
            *extra,
        )
    )
    return replace(settings, overrides={"trainer.precision": precision}) if given else settings


@pytest.mark.parametrize(
    ("native", "precision", "given", "expected"),
    [
        (True, "bf16-mixed", False, "bf16-mixed"),  # trainer=cpu's preset, native bfloat16
        (False, "bf16-mixed", False, "32-true"),  # the preset, bfloat16 only emulated
        (False, "bf16-mixed", True, "bf16-mixed"),  # typed on the command line: kept
        (False, "64-true", True, "64-true"),
        (True, None, False, "32-true"),  # TINY's
    ],
)
def test_heads_runs_in_the_precision_mode_eval_would(
    analysed, tmp_path, monkeypatch, native: bool, precision: str | None, given: bool, expected
) -> None:
    """mode=heads' precision is native_precision's, mode=eval's, on a CPU with or without
    native bfloat16 (the checkpoint's analysis stubbed: only the settings it gets count)."""
    monkeypatch.setattr(training.precision, "native_bf16_cpu", lambda: native)
    got = []
    monkeypatch.setattr(
        features.heads.command,
        "analyse_checkpoint",
        lambda ckpt, settings: got.append(settings.trainer.precision) or {},
    )
    ckpt, _ = analysed["decoder"]
    features.heads.command.run(_with_precision("heads", ckpt, tmp_path, precision, given))
    as_eval = native_precision(_with_precision("eval", ckpt, tmp_path, precision, given))
    assert got == [as_eval.trainer.precision] == [expected]


@pytest.mark.parametrize("precision", [None, "bf16-mixed"])
@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_base_loss_is_mode_evals_loss_to_the_bit(
    analysed, arch: str, precision: str | None, tmp_path: Path
) -> None:
    """With the same settings (TINY's 32-true; bf16-mixed given) both commands score in the
    same precision, the same tokens (a decoder's windows at a stride of the window, an
    encoder's masks from job.seed and each batch's tokens), with the same forward pass per
    batch (no gate, SDPA) and the same running sum over the batches: the same loss to the bit.
    Tolerance 0, so any difference is one of computation: heads in float32 against eval's
    bf16-mixed is 3e-6 (encoder) and 2e-5 (decoder) away, torch.sum's order 2 ulps (decoder)."""
    ckpt, result = analysed[arch]
    if precision is not None:  # a copy of the run: heads.json of the fixture's result kept
        shutil.copytree(ckpt.parent.parent, tmp_path / "run")
        ckpt = tmp_path / "run" / "checkpoints" / ckpt.name
        settings = _with_precision("heads", ckpt, tmp_path, precision, True)
        result = features.heads.command.run(settings)
    settings = _with_precision("eval", ckpt, tmp_path, precision, precision is not None)
    evaluated = modes.eval.run(settings)["results"][0]
    expected = precision or "32-true"
    assert result["precision"] == result["provenance"]["precision"] == expected
    assert evaluated["precision"] == expected
    assert result["tokens"] == evaluated["tokens_scored"]
    assert result["base_loss"] == evaluated["loss"]


def _sweep(root: Path, ckpt: Path, jobs: list[tuple[str, str, str]]) -> Path:
    """A sweep directory of copies of one run: (dropout, seed, status) per job."""
    for num, (dropout, seed, status) in enumerate(jobs):
        job = root / str(num)
        shutil.copytree(ckpt.parent.parent, job)
        for stale in ("heads.json", "heads.png", "prune_curve.png"):
            (job / "checkpoints" / stale).unlink(missing_ok=True)
        shutil.copy(job / "checkpoints" / ckpt.name, job / "checkpoints" / "best.ckpt")
        overrides = {"model.dropout": dropout, "seed": seed}
        write_record(job, {"status": status, "overrides": overrides, "best_val_loss": 1.0})
    return root


def test_a_sweep_is_analysed_per_job_and_grouped_over_seeds(analysed, tmp_path) -> None:
    ckpt, single = analysed["decoder"]
    jobs = [("0.0", "1", "completed"), ("0.0", "2", "completed"), ("0.1", "1", "failed")]
    sweep = _sweep(tmp_path / "sweep", ckpt, jobs)
    # The summary is written again from the records: its own sections, then the head section
    # (an earlier one replaced).
    old = "# Sweep\n\n## Configurations\n\nstale\n\n## Heads\n\nold analysis\n"
    (sweep / "summary.md").write_text(old)
    result = features.heads.command.run(_settings(sweep, tmp_path))
    assert len(result["results"]) == 2  # the failed job is left out
    assert not (sweep / "2" / "checkpoints" / "heads.json").exists()
    for record in result["results"]:  # equal weights: equal analyses
        assert record["pruned_half_loss"] == pytest.approx(single["pruned_half_loss"])
    summary = (sweep / "summary.md").read_text()
    assert summary.startswith(f"# Sweep {sweep}\n\n3 runs in 2 configurations.")
    sections = [part.split("\n", 1)[0] for part in summary.split("\n## ")[1:]]
    assert sections == ["Configurations", "Runs", "Heads"] and "stale" not in summary
    heads_90 = statistics.fmean(single["heads_for_90"])
    heads = summary.split("\n## Heads\n")[1]
    rows = [line for line in heads.splitlines() if line.startswith("| 0.")]
    assert len(rows) == 2  # grouped by dropout, the seeds as replicates
    assert rows[0].startswith("| 0.0 | 2 | 0 |") and f"{heads_90:.2f} ± 0.00" in rows[0]
    assert rows[1].startswith("| 0.1 | 0 | 1 | failed |")
    assert summary.count("## Heads") == 1 and "old analysis" not in summary
    assert (sweep / "prune_curves.png").stat().st_size > 0


def test_bad_input_is_one_line(analysed, tmp_path) -> None:
    ckpt, _ = analysed["decoder"]
    sweep = _sweep(tmp_path / "sweep", ckpt, [("0.0", "1", "failed")])
    with pytest.raises(ValueError, match=r"holds no completed job \(1 with a checkpoint"):
        features.heads.command.run(_settings(sweep, tmp_path))
    with pytest.raises(ValueError, match="heads.prune is for mode=eval"):
        features.heads.command.run(_settings(ckpt, tmp_path, "heads.prune=0.5"))
    # float16 (16-mixed needs a GPU, named here: refused before the trainer looks for one)
    for precision in ("16-true", "16-mixed"):
        line = (
            f"mode=heads does not run in trainer.precision={precision}: float16's range is too "
            "small for the heads' importance gradients without a gradient scaler; give "
            "trainer.precision=bf16-mixed, 32-true, bf16-true or 64-true"
        )
        settings = _settings(
            ckpt, tmp_path, "trainer.accelerator=gpu", f"trainer.precision={precision}"
        )
        with pytest.raises(ValueError, match=f"^{re.escape(line)}$"):
            features.heads.command.run(settings)


def _eval(ckpt: Path, tmp_path: Path, *overrides: str) -> dict:
    cfg = compose_config(
        "mode=eval",
        f"ckpt_path={ckpt}",
        "model.max_seq_len=64",
        f"output_dir={tmp_path}",
        *overrides,
    )
    return modes.eval.run(parse_settings(cfg))["results"][0]


def test_eval_gates_off_the_heads_named_or_the_least_important(analysed, tmp_path) -> None:
    ckpt, result = analysed["decoder"]
    # Only this test's records: the copied run may carry records of other tests' evaluations.
    (ckpt.parent / "eval.jsonl").unlink(missing_ok=True)
    by_head = {f"{r['layer']}:{r['head']}": r for r in result["heads"]}
    named = _eval(ckpt, tmp_path, "heads.prune=[0:1]")
    assert named["heads_pruned"] == ["0:1"]
    assert named["loss"] == pytest.approx(
        result["base_loss"] + by_head["0:1"]["delta_loss"], abs=1e-5
    )
    half = _eval(ckpt, tmp_path, "heads.prune=0.5")
    point = next(p for p in result["prune_curve"] if p["removed_fraction"] == 0.5)
    assert half["heads_pruned"] == point["removed"]
    assert half["loss"] == point["loss"]  # the same passes and the same running sum
    whole = _eval(ckpt, tmp_path)
    assert "heads_pruned" not in whole
    records = [json.loads(line) for line in (ckpt.parent / "eval.jsonl").read_text().splitlines()]
    assert sorted(str(r.get("heads_prune")) for r in records) == sorted(["0.5", "['0:1']", "None"])


@pytest.mark.parametrize(
    ("override", "message"),
    [
        ("heads.prune=[0:2]", "outside the checkpoint's layers 0-0 and heads 0-1"),
        ("heads.log_every=0", "heads.log_every=0 must be >= 1"),
    ],
)
def test_bad_head_settings_are_one_line(analysed, tmp_path, override, message) -> None:
    ckpt, _ = analysed["decoder"]
    with pytest.raises(ValueError, match=message) as caught:
        _eval(ckpt, tmp_path, override)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    ("prune", "message"),
    [
        (1.5, r"heads.prune=1.5 is outside \[0, 1\]"),
        (-0.1, r"heads.prune=-0.1 is outside \[0, 1\]"),
        (["0-1"], "heads.prune names '0-1': write heads as LAYER:HEAD"),
        ("", "heads.prune names no head"),
        (True, "must be a fraction of the heads"),
    ],
)
def test_bad_prune_values_are_one_line(prune, message) -> None:
    with pytest.raises(ValueError, match=message) as caught:
        HeadsConfig(prune=prune)
    assert "\n" not in str(caught.value)


def test_prune_values_are_normalised() -> None:
    assert HeadsConfig(prune=1).prune == 1.0
    assert HeadsConfig(prune="0:1, 1:3,0:1").prune == ["0:1", "1:3"]
    assert HeadsConfig(prune=["1:0"]).prune == ["1:0"]


def test_head_stats_are_logged_every_n_steps(tmp_path) -> None:
    from train import run

    out = tmp_path / "run"
    run(
        compose_config(
            "logger=csv",
            "trainer.max_steps=6",
            "trainer.val_check_interval=6",
            "heads.log_every=3",
            f"output_dir={out}",
        )
    )
    with open(out / "csv" / "metrics.csv") as f:
        rows = [r for r in csv.DictReader(f) if r.get("heads/entropy/L0H0")]
    assert [int(r["step"]) for r in rows] == [3, 6]
    for row in rows:
        for head in ("L0H0", "L0H1"):
            assert 0 < float(row[f"heads/entropy/{head}"]) <= math.log(32)
            assert float(row[f"heads/importance/{head}"]) > 0


def test_mode_heads_reads_its_checkpoint_once(tiny_checkpoints, tmp_path, monkeypatch) -> None:
    assert checkpoint_reads(tiny_checkpoints["decoder"], tmp_path, monkeypatch, "heads")
