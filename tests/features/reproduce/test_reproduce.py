"""``mode=reproduce``: a run re-run from its record in a fresh process with a fresh cache gives
every number again, bitwise on this CPU; a number that moved is named and fails the command;
a record on other code, or one that asks to run anything but tinylm's own settings, is refused
before anything runs."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from common.provenance import code_version
from features.reproduce.command import HISTORY_FILE, check_only_own_settings, chosen_runs
from tests.conftest import TINY, copy_tiny_runs, train_py, warm_train_py
from train import run


def train_recorded(out: Path, *overrides: str) -> Path:
    """A tiny run trained warm (``warm_train_py``): mode=reproduce re-runs it in a new
    interpreter, with another hash seed, the tokenizers library's own hash keys and empty
    caches (a user's first run elsewhere)."""
    args = [*TINY, "trainer.max_steps=12", "trainer.val_check_interval=6", *overrides]
    done = warm_train_py(*args, f"output_dir={out}", root=out.parent)
    assert done.returncode == 0, done.stderr[-2000:]
    return out


@pytest.fixture(scope="module")
def gpt_run(tmp_path_factory: pytest.TempPathFactory) -> Path:
    base = tmp_path_factory.mktemp("recorded")
    return train_recorded(base / "gpt")


def history(run_dir: Path) -> list[dict]:
    return [json.loads(line) for line in (run_dir / HISTORY_FILE).read_text().splitlines()]


@pytest.mark.slow
def test_a_bert_run_is_reproduced_bitwise_with_its_tokenizer(tmp_path: Path) -> None:
    recorded = train_recorded(tmp_path / "bert", "model=bert", *TINY[1:5])
    done = train_py("mode=reproduce", f"ckpt_path={recorded}", "hydra.run.dir=again", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    rerun = tmp_path / "again" / "bert"
    # WordPiece trained again in an empty cache (the re-run's own, deleted after it).
    assert (rerun / "tokenizer.json").read_bytes() == (recorded / "tokenizer.json").read_bytes()
    assert not (tmp_path / "again" / "fresh-cache").exists()
    before, after = (json.loads((d / "metrics.json").read_text()) for d in (recorded, rerun))
    assert before["config"]["model.arch"] == "encoder"
    for key in ("best_val_loss", "val_loss", "val_acc", "val_curve", "sample", "consumed"):
        if key == "val_curve":  # [step, loss, tokens, seconds]: all but the seconds
            assert [p[:3] for p in after[key]] == [p[:3] for p in before[key]]
        elif key == "consumed":
            assert {**after[key], "seconds": 0} == {**before[key], "seconds": 0}
        else:
            assert after[key] == before[key], key
    (entry,) = history(recorded)
    assert entry["verdict"] == "identical"
    assert entry["identical"] > 30 and entry["different"] == entry["missing"] == 0
    assert "tokenizer.json" in (tmp_path / "again" / "reproduction.md").read_text()
    assert "reproduced " in (recorded / "report.html").read_text()


@pytest.mark.slow
def test_a_number_that_moved_is_named_and_fails_the_command(gpt_run: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for job in ("0", "1"):
        shutil.copytree(gpt_run, sweep / job)
    record = json.loads((sweep / "1" / "metrics.json").read_text())
    record["best_val_loss"] += 1e-3
    (sweep / "1" / "metrics.json").write_text(json.dumps(record))
    done = train_py("mode=reproduce", f"ckpt_path={sweep}", "hydra.run.dir=again", cwd=tmp_path)
    assert done.returncode == 1
    last = done.stderr.strip().splitlines()[-1]
    assert last.startswith("tinylm: error: not reproduced: 1: 1 numbers moved (best_val_loss)")
    (identical,) = history(sweep / "0")
    (moved,) = history(sweep / "1")
    assert identical["verdict"] == "identical" and identical["different"] == 0
    assert moved["verdict"] == "different" and moved["moved"] == ["best_val_loss"]
    table = (tmp_path / "again" / "reproduction.md").read_text()
    assert f"| best_val_loss | {record['best_val_loss']!r} |" in table
    page = (sweep / "report.html").read_text()
    assert "reproduced " in page and "1 numbers moved (best_val_loss)" in page


@pytest.mark.slow
def test_a_fine_tune_is_reproduced_and_its_pretrained_runs_record_kept(
    tiny_checkpoints, tmp_path: Path
) -> None:
    pretrained = copy_tiny_runs(tiny_checkpoints, tmp_path / "runs") / "decoder"
    tuned = tmp_path / "tuned"
    settings = ("mode=finetune", f"ckpt_path={pretrained}", "finetune.max_steps=3", "logger=none")
    done = train_py(*settings, "finetune.epochs=1", f"hydra.run.dir={tuned}", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    evaluations = pretrained / "checkpoints" / "eval.jsonl"
    written = evaluations.read_text()
    done = train_py("mode=reproduce", f"ckpt_path={tuned}", "hydra.run.dir=again", cwd=tmp_path)
    assert done.returncode == 0, done.stderr[-2000:]
    (entry,) = history(tuned)
    assert entry["verdict"] == "identical" and entry["identical"] > 30
    # The re-run fine-tuned a link to the checkpoint: the recorded one's evaluation stays.
    assert evaluations.read_text() == written
    assert (tmp_path / "again" / "tuned-pretrained" / "checkpoints" / "eval.jsonl").is_file()


def plant(run_dir: Path, tmp_path: Path, **overrides: str) -> Path:
    """A copy of ``run_dir`` whose record asks for ``overrides`` too."""
    planted = shutil.copytree(run_dir, tmp_path / "planted")
    record = json.loads((planted / "metrics.json").read_text())
    record["overrides"].update(overrides)
    (planted / "metrics.json").write_text(json.dumps(record))
    return planted


@pytest.mark.parametrize(
    ("key", "value", "why"),
    [
        ("hydra.callbacks.run._target_", "tests.faults.touch", "is a Hydra setting"),
        ("hydra.launcher.n_jobs", "2", "is a Hydra setting"),
        ("model._target_", "tests.faults.touch", "names a _target_"),
        ("data.path", "{_target_: tests.faults.touch}", "names a _target_"),
        ("data.path", "${oc.env:HOME}", "is an interpolation"),
        ("model.num_heads", "1,2", "is a sweep"),
        ("+hydra/callbacks", "x", "is no plain key"),
        ("mode", "export", "is a mode=export record"),
    ],
)
def test_a_planted_record_runs_nothing(
    gpt_run: Path, tmp_path: Path, make_cfg, key: str, value: str, why: str
) -> None:
    planted = plant(gpt_run, tmp_path, **{key: value})
    # What Hydra would read from a run's .hydra/ folder is never read.
    (planted / ".hydra").mkdir()
    (planted / ".hydra" / "config.yaml").write_text(
        "hydra:\n  callbacks:\n    x:\n      _target_: os.system\n      command: touch pwned\n"
    )
    out = tmp_path / "again"
    with pytest.raises(ValueError, match=why) as refused:
        run(make_cfg("mode=reproduce", f"ckpt_path={planted}", output_dir=out))
    assert "\n" not in str(refused.value)
    assert not out.exists() and not list(tmp_path.rglob("pwned"))


def test_an_unknown_key_of_a_record_is_named_with_a_guess(gpt_run, tmp_path, make_cfg) -> None:
    planted = plant(gpt_run, tmp_path, **{"model.num_head": "2"})
    with pytest.raises(ValueError, match=r"cannot be replayed .*did you mean model.num_heads"):
        run(make_cfg("mode=reproduce", f"ckpt_path={planted}"))


def test_a_record_of_other_code_is_refused_naming_both(gpt_run, tmp_path, make_cfg) -> None:
    planted = shutil.copytree(gpt_run, tmp_path / "old")
    record = json.loads((planted / "metrics.json").read_text())
    record["provenance"]["code"] = {"commit": "1234567" + "0" * 33, "dirty": False}
    (planted / "metrics.json").write_text(json.dumps(record))
    with pytest.raises(ValueError) as refused:
        run(make_cfg("mode=reproduce", f"ckpt_path={planted}", output_dir=tmp_path / "again"))
    message = str(refused.value)
    assert "recorded on commit 1234567, this checkout is " in message
    assert "check out 1234567" in message and "reproduce.other_code=true" in message
    assert not (tmp_path / "again").exists()
    # The same commit with other uncommitted changes: the record keeps only their hash.
    record["provenance"]["code"] = {**code_version(), "dirty": True, "diff_hash": "0" * 16}
    (planted / "metrics.json").write_text(json.dumps(record))
    with pytest.raises(
        ValueError, match=r"\(dirty, diff 0000000000000000\), this checkout is "
    ) as refused:
        run(make_cfg("mode=reproduce", f"ckpt_path={planted}"))
    assert "git stash" in str(refused.value) and "check out" not in str(refused.value)


def test_jobs_choose_among_a_sweeps_completed_jobs(gpt_run: Path, tmp_path: Path) -> None:
    sweep = tmp_path / "sweep"
    for job in ("0", "1", "2"):
        shutil.copytree(gpt_run, sweep / job)
    failed = json.loads((sweep / "2" / "metrics.json").read_text())
    (sweep / "2" / "metrics.json").write_text(json.dumps({**failed, "status": "failed"}))
    assert [name for name, _, _ in chosen_runs(sweep, ["1"])] == ["1"]
    assert [name for name, _, _ in chosen_runs(sweep, None)] == ["0", "1"]  # 2 failed
    with pytest.raises(ValueError, match=r"names 7, which .* lacks; its jobs: 0, 1, 2"):
        chosen_runs(sweep, ["7"])
    with pytest.raises(ValueError, match="reproduce.jobs is for a sweep directory"):
        chosen_runs(sweep / "0", ["0"])
    with pytest.raises(ValueError, match="no completed run"):
        chosen_runs(sweep, ["2"])


def test_a_setting_of_the_run_is_refused_not_ignored() -> None:
    check_only_own_settings({"mode": "reproduce", "ckpt_path": "r", "reproduce.jobs": "[0]"})
    with pytest.raises(ValueError, match="model.num_heads is not read by mode=reproduce"):
        check_only_own_settings({"mode": "reproduce", "model.num_heads": "4"})
