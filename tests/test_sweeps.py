"""Sweeps: seeds as replicates, what the summary and its pictures say, parallel and cluster
launchers, safe re-runs, concurrent data preparation, pre-emption signals, TensorBoard."""

from __future__ import annotations

import csv
import json
import math
import multiprocessing
import os
import shutil
import signal
import statistics
from pathlib import Path

import pytest
import torch

from analysis.plots import heatmap_cells, mean_curve
from analysis.run_record import write_record
from analysis.summary import group_runs
from analysis.sweep_summary import write_sweep_summary
from modes import SweepConflict
from tests.conftest import TINY, train_py
from tests.faults import SignalAtStep
from train import run

# --------------------------------------------------------------------------- aggregation


def _fake_sweep(root: Path, losses: dict[tuple[str, str], float | None]) -> Path:
    """A sweep directory of metrics.json files: (heads, seed) -> best_val_loss (None: the job
    failed). Jobs are numbered in the order given, so job 10 follows job 9."""
    for job, ((heads, seed), loss) in enumerate(losses.items()):
        overrides = {"model.num_heads": heads, "seed": seed, "logger": "none"}
        if loss is None:
            record = {"status": "failed", "error": "boom", "overrides": overrides}
        else:
            curve = [[5, loss + 1.0], [10, loss + 0.5], [15, loss]]
            record = {
                "status": "completed",
                "best_val_loss": loss,
                "val_ppl": math.exp(loss),
                "params": 1000,
                "overrides": overrides,
                "val_curve": curve,
            }
        write_record(root / str(job), record)
    return root


# Heads 1 is clearly worse than heads 4 (gap 0.3, spread ~0.01); heads 2 differs from heads 4
# by 0.005, inside its spread; heads 8 failed twice and completed once.
LOSSES = {
    **{("1", s): v for s, v in zip("123", (2.31, 2.30, 2.32), strict=True)},
    **{("2", s): v for s, v in zip("123", (2.015, 2.000, 2.030), strict=True)},
    **{("4", s): v for s, v in zip("123", (2.01, 1.99, 2.03), strict=True)},
    **{("8", s): v for s, v in zip("123", (None, None, 2.5), strict=True)},
}


def _csv(path: Path) -> list[dict[str, str]]:
    with open(path) as f:
        return list(csv.DictReader(f))


def test_seeds_are_replicates_of_one_configuration(tmp_path: Path) -> None:
    sweep = _fake_sweep(tmp_path, LOSSES)
    write_sweep_summary(sweep)
    rows = {r["model.num_heads"]: r for r in _csv(sweep / "summary.csv")}
    assert list(rows) == ["1", "2", "4", "8"]  # one row per configuration, natural order
    for heads in ("1", "2", "4"):
        losses = [LOSSES[(heads, s)] for s in "123"]
        assert rows[heads]["n"] == "3" and rows[heads]["failed"] == "0"
        assert float(rows[heads]["best_val_loss_mean"]) == pytest.approx(sum(losses) / 3)
        mean = sum(losses) / 3
        sample_std = math.sqrt(sum((x - mean) ** 2 for x in losses) / 2)
        assert float(rows[heads]["best_val_loss_std"]) == pytest.approx(sample_std)
    assert (rows["8"]["n"], rows["8"]["failed"], rows["8"]["best_val_loss_std"]) == ("1", "2", "")
    # Best: heads 4 (mean 2.01). Heads 1 is 0.3 worse: beyond 2 standard errors. Heads 2 is
    # 0.005 worse with standard errors ~0.009 each: within noise. Heads 8: n = 1, not judged.
    assert rows["4"]["vs_best"] == "0.0"
    assert rows["1"]["exceeds_2se"] == "True" and rows["2"]["exceeds_2se"] == "False"
    assert rows["8"]["exceeds_2se"] == ""
    summary = (sweep / "summary.md").read_text()
    assert "2.0100 ± 0.0200" in summary and "| best |" in summary
    assert "+0.3000 (> 2 SE)" in summary and "+0.0050 (within noise)" in summary
    assert "Worse than the best beyond noise: model.num_heads=1." in summary
    runs = _csv(sweep / "runs.csv")
    assert [r["run"] for r in runs] == [str(i) for i in range(12)]  # 10 and 11 after 9
    assert [r["best_val_loss"] for r in runs[:3]] == ["2.31", "2.3", "2.32"]


@pytest.mark.parametrize(("ratio", "verdict"), [(1.5, "within noise"), (2.5, "> 2 SE")])
def test_the_two_standard_error_rule_is_judged_near_its_threshold(
    tmp_path: Path, ratio: float, verdict: str
) -> None:
    """Hand-made runs whose difference from the best is ``ratio`` standard errors of the
    difference: 1.5 must read within noise (a one-SE rule would call it beyond), 2.5 beyond
    (a three-SE rule would not)."""
    half_spread = 0.01  # two seeds at mean -/+ this: std = half_spread * sqrt(2), SE = half_spread
    se_of_difference = math.hypot(half_spread, half_spread)
    difference = ratio * se_of_difference
    losses = {}
    for heads, mean in (("4", 2.0), ("1", 2.0 + difference)):
        losses[(heads, "1")] = mean - half_spread
        losses[(heads, "2")] = mean + half_spread
    sweep = _fake_sweep(tmp_path, losses)
    write_sweep_summary(sweep)
    rows = {r["model.num_heads"]: r for r in _csv(sweep / "summary.csv")}
    assert float(rows["1"]["vs_best"]) == pytest.approx(difference)
    assert rows["1"]["exceeds_2se"] == str(verdict == "> 2 SE")
    summary = (sweep / "summary.md").read_text()
    assert f"+{difference:.4f} ({verdict})" in summary


def test_without_seeds_there_is_no_spread_and_no_verdict(tmp_path: Path) -> None:
    sweep = _fake_sweep(tmp_path, {("1", "1"): 2.3, ("2", "1"): 2.1})
    write_sweep_summary(sweep)
    summary = (sweep / "summary.md").read_text()
    table = summary.split("## Configurations")[1].split("## Runs")[0]
    assert "±" not in table and "2.1000" in table
    assert "fewer than 2 completed runs" in summary
    assert all(r["exceeds_2se"] == "" for r in _csv(sweep / "summary.csv"))


def test_heatmap_cells_and_curves_come_from_the_configurations(tmp_path: Path) -> None:
    sweep = _fake_sweep(tmp_path, LOSSES)
    written = write_sweep_summary(sweep)
    assert {p.name for p in written} >= {"heatmap_val_loss.png", "curves_val_loss.png"}
    from analysis.run_record import collect_runs

    configs = group_runs(collect_runs(sweep), ["model.num_heads"])
    rows, cols, cells = heatmap_cells(configs, ["model.num_heads"])
    assert rows == ["1", "2", "4", "8"] and cols == [""]
    assert [c[0].mean for c in cells[:3]] == pytest.approx([2.31, 2.015, 2.01])
    assert cells[3][0].failed == 2 and cells[3][0].mean == pytest.approx(2.5)
    steps, mean, low, high = mean_curve(configs[0])
    assert steps == [5, 10, 15]
    assert mean == pytest.approx([3.31, 2.81, 2.31]) and low[-1] == 2.30 and high[-1] == 2.32


def test_an_all_failed_cell_is_marked_failed(tmp_path: Path) -> None:
    sweep = _fake_sweep(tmp_path, {("1", "1"): 2.0, ("2", "1"): None, ("2", "2"): None})
    write_sweep_summary(sweep)
    rows = {r["model.num_heads"]: r for r in _csv(sweep / "summary.csv")}
    assert (rows["2"]["n"], rows["2"]["failed"], rows["2"]["best_val_loss_mean"]) == ("0", "2", "")
    from analysis.run_record import collect_runs

    _, _, cells = heatmap_cells(
        group_runs(collect_runs(sweep), ["model.num_heads"]), ["model.num_heads"]
    )
    assert cells[1][0].mean is None and cells[1][0].failed == 2
    assert "| 2 | 0 | 2 | failed |" in (sweep / "summary.md").read_text()


# --------------------------------------------------------------------------- through train.py


def test_seed_sweep_in_parallel_jobs_aggregates_and_overlaps(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    # Each job waits at its first step for the other: run side by side, both go on at once
    # (however slowly a worker started); run one after the other, the first would wait alone.
    meet = tmp_path / "present"
    wrapper = (
        "from tests.faults import MeetOtherJobs, main_with\n"
        f"main_with(MeetOtherJobs({str(meet)!r}, 2))\n"
    )
    proc = train_py(
        "-m",
        *TINY,
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "seed=1,2",
        "hydra/launcher=joblib",
        "hydra.launcher.n_jobs=2",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
        wrapper=wrapper,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert len(list(meet.iterdir())) == 2  # two processes
    jobs = [json.loads((sweep / str(i) / "metrics.json").read_text()) for i in (0, 1)]
    assert [j["status"] for j in jobs] == ["completed", "completed"]
    # Side by side: each started before the other finished.
    assert jobs[0]["started_at"] < jobs[1]["finished_at"]
    assert jobs[1]["started_at"] < jobs[0]["finished_at"]
    # Each job on its share of the cores.
    assert all(j["threads"] == max(1, (os.cpu_count() or 1) // 2) for j in jobs)
    assert [j["val_curve"][-1][0] for j in jobs] == [10, 10]
    (config,) = _csv(sweep / "summary.csv")  # seed is the only swept key: one configuration
    assert config["n"] == "2"
    assert float(config["best_val_loss_mean"]) == pytest.approx(
        statistics.fmean(j["best_val_loss"] for j in jobs)
    )
    assert (sweep / "curves_val_loss.png").read_bytes()[:4] == b"\x89PNG"


@pytest.mark.slow
def test_submitit_local_sweep_runs_both_jobs(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = train_py(
        "-m",
        *TINY,
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        "model.dropout=0.0,0.1",
        "hydra/launcher=submitit_local",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert [r["status"] for r in _csv(sweep / "runs.csv")] == ["completed", "completed"]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [
        (["hydra/launcher=joblib", "hydra.launcher.n_jobs=0"], "hydra.launcher.n_jobs=0 runs no"),
        (["hydra/launcher=slurm"], "sbatch, which is not on this machine"),
    ],
)
def test_bad_launcher_settings_give_one_line(tmp_path: Path, overrides, message) -> None:
    if "hydra/launcher=slurm" in overrides and shutil.which("sbatch"):
        pytest.skip("this machine has SLURM")
    proc = train_py(
        "-m",
        *TINY,
        "seed=1,2",
        *overrides,
        f"hydra.sweep.dir={tmp_path / 's'}",
        cwd=tmp_path,
        timeout=120,
    )
    assert proc.returncode == 1
    assert "Traceback" not in proc.stderr
    lines = [x for x in proc.stderr.splitlines() if x.startswith("tinylm: error:")]
    assert len(lines) == 1 and message in lines[0], proc.stderr[-2000:]
    assert not (tmp_path / "s" / "0").exists()  # no job started


def test_rerun_with_other_values_stops_and_keeps_the_old_results(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    base = [
        "-m",
        *TINY,
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        f"hydra.sweep.dir={sweep}",
    ]
    first = train_py(*base, "model.dropout=0.0", cwd=tmp_path)
    assert first.returncode == 0, first.stderr[-3000:]
    before = (sweep / "0" / "metrics.json").read_text()
    second = train_py(*base, "model.dropout=0.3", cwd=tmp_path)
    assert second.returncode == 1
    assert "Traceback" not in second.stderr
    (line,) = [x for x in second.stderr.splitlines() if x.startswith("tinylm: error:")]
    assert "model.dropout=0.3 (there: 0.0)" in line and str(sweep / "0") in line
    assert (sweep / "0" / "metrics.json").read_text() == before  # the old result, untouched


def test_same_job_check_names_the_differences(tmp_path: Path) -> None:
    from modes.train import sweep_job_state

    write_record(tmp_path, {"status": "completed", "overrides": {"a": "1", "b": "2"}})
    assert sweep_job_state(tmp_path, None, {"a": "1", "b": "2"})[0]["status"] == "completed"
    with pytest.raises(SweepConflict, match=r"a=5 \(there: 1\), c=3 \(there: None\)"):
        sweep_job_state(tmp_path, None, {"a": "5", "b": "2", "c": "3"})


# --------------------------------------------------------------------------- data, signals, logs


def _prepare_in_process(cache: str, out: str) -> None:
    os.environ["TINYLM_CACHE"] = cache
    from data.config import DataConfig
    from data.datamodule import prepare

    prepared = prepare(DataConfig(vocab_size=300), "decoder")
    store = prepared.stores["train"]
    ids, offsets = store.tokens[:], store.starts[:]
    Path(out).write_text(
        json.dumps(
            {
                "tokenizer": prepared.tokenizer.to_str(),
                "ids": int(ids.sum()),
                "n": len(ids),
                "offsets": int(offsets[-1]),
            }
        )
    )


def test_two_processes_preparing_one_cache_at_once_agree(tmp_path: Path) -> None:
    cache = tmp_path / "cache"
    # Two children forked by one fresh server process that imported the data code first:
    # fresh processes both, that reach the cache at once, for one interpreter start-up.
    context = multiprocessing.get_context("forkserver")
    context.set_forkserver_preload(["data.datamodule", "tests.test_sweeps"])
    outs = [tmp_path / f"out{i}.json" for i in range(2)]
    workers = [
        context.Process(target=_prepare_in_process, args=(str(cache), str(out))) for out in outs
    ]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(timeout=300)
    assert [w.exitcode for w in workers] == [0, 0]
    first, second = (json.loads(out.read_text()) for out in outs)
    assert first == second and first["n"] > 1000
    assert not list(cache.rglob("*.tmp"))  # no half-written file left behind
    assert len(list((cache / "tokens").iterdir())) == 1  # one store, no temporary left


RESUME = ["logger=csv", "model.dropout=0.2", "trainer.max_steps=24", "trainer.val_check_interval=8"]


def test_sigusr1_saves_and_resumes_to_the_same_loss(make_cfg, tmp_path: Path) -> None:
    from modes import Interrupted

    full = run(make_cfg(*RESUME, output_dir=tmp_path / "full"))
    with pytest.raises(Interrupted, match="SIGUSR1 at step 11") as err:
        run(make_cfg(*RESUME, output_dir=tmp_path / "cut"), [SignalAtStep(11, signal.SIGUSR1)])
    assert err.value.exit_code == 128 + signal.SIGUSR1
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    resumed = run(make_cfg(*RESUME, f"ckpt_path={last}", output_dir=tmp_path / "resumed"))
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)
    # The curve survives the interruption: every validation of the whole run is in it.
    assert [point[0] for point in resumed["val_curve"]] == [8, 16, 24]
    assert resumed["val_curve"][-1][1] == pytest.approx(full["val_curve"][-1][1], abs=1e-6)


def test_preemption_hands_over_to_the_requeue_handler_after_saving(make_cfg, tmp_path):
    """Under submitit (SIGUSR2) the handler found before training requeues the job: it must
    run, and only once the checkpoint is on disk."""
    from modes import Interrupted

    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    calls: list[bool] = []
    previous = signal.signal(signal.SIGUSR2, lambda signum, frame: calls.append(last.is_file()))
    try:
        with pytest.raises(Interrupted, match="SIGUSR2 at step 5"):
            run(
                make_cfg("trainer.max_steps=20", output_dir=tmp_path / "run"),
                [SignalAtStep(5, signal.SIGUSR2)],
            )
    finally:
        signal.signal(signal.SIGUSR2, previous)
    assert calls == [True]
    assert torch.load(last, weights_only=True)["global_step"] == 5


def test_tensorboard_logger_writes_event_files_named_by_overrides(tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    proc = train_py(
        "-m",
        *[o for o in TINY if not o.startswith("logger=")],
        "logger=tensorboard",
        "trainer.max_steps=4",
        "trainer.val_check_interval=2",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    for job, dropout in ((0, "0.0"), (1, "0.1")):
        (run_dir,) = (sweep / str(job) / "tensorboard").iterdir()
        assert run_dir.name == f"model.dropout={dropout}"  # the swept value, not all overrides
        assert list(run_dir.glob("events.out.tfevents.*"))


def test_eval_over_a_sweep_groups_seeds_as_the_summary_does(tmp_path: Path) -> None:
    from modes.eval import by_configuration

    rows = []
    for job, ((heads, seed), loss) in enumerate(LOSSES.items()):
        if loss is None:
            continue
        write_record(tmp_path / str(job), {"overrides": {"model.num_heads": heads, "seed": seed}})
        ckpt = tmp_path / str(job) / "checkpoints" / "best.ckpt"
        rows.append({"checkpoint": str(ckpt), "loss": loss, "ppl": math.exp(loss)})
    table = by_configuration(rows)
    lines = {line.split(" | ")[0].strip("| "): line for line in table.splitlines()[2:]}
    assert list(lines) == ["1", "2", "4", "8"]
    assert "| 3 | 0 | 2.0100 ± 0.0200 | best |" in lines["4"]
    assert "(> 2 SE)" in lines["1"] and "(within noise)" in lines["2"]
    assert "| 1 | 0 | 2.5000 |" in lines["8"]  # the one completed run of heads 8
