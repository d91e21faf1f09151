"""Provenance: the code version of a dirty checkout, the settings in effect on this machine
(the accelerator auto picked, threads, deterministic mode, compile and attention kernel, each
fallback recorded), runs of one sweep on other code or another machine named in its summary,
and a sweep re-run that meets a job finished on other code."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest
import torch

from analysis.run_record import read_record, write_record
from analysis.sweep_summary import write_sweep_summary
from common import provenance as stamps
from common.provenance import code_version, differing_runs, provenance
from modes.train import sweep_job_state


def _git(root: Path, *args: str) -> None:
    subprocess.run(["git", "-C", str(root), *args], check=True, capture_output=True)


def test_a_dirty_checkout_records_dirty_and_the_hash_of_its_changes(tmp_path: Path) -> None:
    _git(tmp_path, "init", "-q")
    (tmp_path / "a.py").write_text("x = 1\n")
    _git(tmp_path, "add", "a.py")
    _git(tmp_path, "-c", "user.name=t", "-c", "user.email=t@t", "commit", "-qm", "one")
    read = code_version.__wrapped__  # uncached: the tree changes between the calls
    clean = read(tmp_path)
    assert len(clean["commit"]) == 40 and clean["dirty"] is False and clean["diff_hash"] is None
    (tmp_path / "a.py").write_text("x = 2\n")
    edited = read(tmp_path)
    assert edited["commit"] == clean["commit"] and edited["dirty"] is True
    assert edited["diff_hash"] == read(tmp_path)["diff_hash"]  # the same change, the same hash
    (tmp_path / "a.py").write_text("x = 3\n")
    assert read(tmp_path)["diff_hash"] != edited["diff_hash"]
    (tmp_path / "a.py").write_text("x = 1\n")
    (tmp_path / "new.py").write_text("y = 1\n")  # an untracked file is a change too
    untracked = read(tmp_path)
    assert untracked["dirty"] is True and untracked["diff_hash"] not in (None, edited["diff_hash"])


def test_outside_a_checkout_the_code_is_unknown(tmp_path: Path) -> None:
    assert code_version.__wrapped__(tmp_path) == {
        "commit": "unknown",
        "dirty": "unknown",
        "diff_hash": "unknown",
    }


def test_a_record_names_versions_device_precision_and_command() -> None:
    recorded = provenance("bf16-mixed", "cpu")
    assert recorded["precision"] == "bf16-mixed" and recorded["device"].startswith("CPU: ")
    assert set(recorded["versions"]) == {
        "python",
        "torch",
        "lightning",
        "tokenizers",
        "datasets",
        "transformers",
    }
    assert recorded["code"] == code_version() and recorded["command"]


def _no_gpu(monkeypatch: pytest.MonkeyPatch, cuda: bool = False, mps: bool = False) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: cuda)
    monkeypatch.setattr(torch.backends.mps, "is_available", lambda: mps)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Test GPU")


def test_a_record_names_the_settings_in_effect_on_this_machine(monkeypatch) -> None:
    _no_gpu(monkeypatch)
    before = torch.are_deterministic_algorithms_enabled()
    try:
        for deterministic in (False, True):
            torch.use_deterministic_algorithms(deterministic)  # as Lightning's Trainer sets it
            recorded = provenance("32-true", "auto")
            assert recorded["deterministic"] is deterministic
    finally:
        torch.use_deterministic_algorithms(before)
    assert recorded["accelerator"] == "cpu" and recorded["device"].startswith("CPU: ")
    assert recorded["threads"] == torch.get_num_threads()
    assert (recorded["compile"], recorded["attention"]) == ("off", "sdpa: cpu")
    assert recorded["precision"] == "32-true"  # the keys of older records stay


@pytest.mark.parametrize(
    ("accelerator", "cuda", "mps", "expected"),
    [
        ("auto", False, False, "cpu"),
        ("auto", True, False, "gpu"),
        ("auto", False, True, "mps"),
        ("cuda", True, False, "gpu"),
        ("gpu", True, True, "gpu"),
        ("cpu", True, True, "cpu"),
    ],
)
def test_the_accelerator_is_recorded_as_lightning_resolves_it(
    monkeypatch, accelerator: str, cuda: bool, mps: bool, expected: str
) -> None:
    _no_gpu(monkeypatch, cuda=cuda, mps=mps)
    assert stamps.effective_accelerator(accelerator) == expected
    device = provenance("32-true", accelerator)["device"]
    assert device == "GPU: Test GPU" if expected == "gpu" else device.startswith("CPU: ")


def test_compile_is_recorded_as_it_ran() -> None:
    # training.compile.with_compile turns trainer.compile off where it cannot run, first
    assert provenance("32-true", compiled=True)["compile"] == "inductor"
    assert provenance("32-true")["compile"] == "off"  # not asked, or a mode that does not compile


@pytest.mark.parametrize(
    ("precision", "enabled", "runs", "kernel", "note"),
    [
        ("bf16-mixed", True, True, stamps.FLASH, None),
        ("16-true", True, True, stamps.FLASH, None),
        ("32-true", True, True, "sdpa: no flash (float32 or wider)", "needs float16 or bfloat16"),
        ("bf16-mixed", True, False, "sdpa: no flash (this GPU or torch build)", "GPU: Test GPU"),
        ("bf16-mixed", False, True, "sdpa: no flash (disabled)", "enable_flash_sdp(False)"),
    ],
)
def test_on_a_gpu_the_attention_kernel_says_whether_flash_runs(
    monkeypatch, precision: str, enabled: bool, runs: bool, kernel: str, note: str | None
) -> None:
    _no_gpu(monkeypatch, cuda=True)
    monkeypatch.setattr(torch.backends.cuda, "flash_sdp_enabled", lambda: enabled)
    asked = []
    monkeypatch.setattr(stamps, "flash_runs", lambda dtype: asked.append(dtype) or runs)
    found, said = stamps.attention_kernel.__wrapped__("gpu", precision)  # uncached
    assert found == kernel
    assert said is None if note is None else note in said and said.count("\n") == 0
    if kernel == stamps.FLASH:
        assert asked == ["bfloat16" if precision.startswith("bf16") else "float16"]
    assert stamps.attention_kernel.__wrapped__("cpu", precision) == ("sdpa: cpu", None)


def _run(commit: str, torch: str = "2.13.0") -> dict:
    recorded = provenance("32-true")
    return {
        **recorded,
        "code": {"commit": commit, "dirty": False, "diff_hash": None},
        "versions": {**recorded["versions"], "torch": torch},
    }


def test_jobs_on_other_code_are_named_in_the_summary(tmp_path: Path) -> None:
    commits = ["a" * 40, "b" * 40, "a" * 40, "a" * 40]
    for job, commit in enumerate(commits):
        write_record(
            tmp_path / str(job),
            {
                "status": "completed",
                "best_val_loss": 2.0 + job / 10,
                "overrides": {"seed": str(job)},
                "provenance": _run(commit, torch="2.12.0" if job == 1 else "2.13.0"),
            },
        )
    write_record(tmp_path / "4", {"status": "completed", "best_val_loss": 2.5, "overrides": {}})
    write_sweep_summary(tmp_path)
    (line,) = [x for x in (tmp_path / "summary.md").read_text().splitlines() if "Provenance" in x]
    assert "run 1 (commit bbbbbbb, torch 2.12.0)" in line
    assert "run 4 (no provenance recorded)" in line
    assert "the other 3 (commit aaaaaaa, torch 2.13.0)" in line


def test_runs_on_another_machine_are_named_and_older_records_are_not() -> None:
    runs = [(str(job), {**_run("a" * 40), "threads": 2}) for job in range(3)]
    runs[2][1].update(threads=4, device="CPU: Other", accelerator="cpu")
    line = differing_runs(runs)
    assert line.startswith("runs differ in the machine they ran on: run 2 (CPU: Other, threads 4)")
    assert "the other 2 (" in line and ", threads 2)" in line
    runs[1][1].update(code={"commit": "b" * 40, "dirty": False, "diff_hash": None})
    assert differing_runs(runs).startswith(
        "runs differ in code or library versions and the machine they ran on: "
    )
    # A record from before threads were recorded lacks them: no difference is claimed.
    older = {key: value for key, value in _run("a" * 40).items() if key != "threads"}
    assert differing_runs([("0", older), ("1", {**_run("a" * 40), "threads": 2})]) is None


def test_runs_that_agree_are_not_named() -> None:
    assert differing_runs([("0", _run("a" * 40)), ("1", _run("a" * 40))]) is None
    assert differing_runs([("0", None), ("1", None)]) is None


@pytest.mark.parametrize("rerun_changed", [False, True])
def test_a_rerun_on_changed_code_says_so_and_reruns_when_asked(
    tmp_path: Path, capsys, rerun_changed: bool
) -> None:
    (tmp_path / "checkpoints").mkdir()
    (tmp_path / "checkpoints" / "best.ckpt").write_bytes(b"old")
    old = {"status": "completed", "overrides": {"a": "1"}, "provenance": _run("c" * 40)}
    write_record(tmp_path, old)
    done, resume = sweep_job_state(tmp_path, None, {"a": "1"}, rerun_changed)
    message = capsys.readouterr().err
    assert f"{tmp_path} completed on commit ccccccc, not this checkout's" in message
    if rerun_changed:
        assert done is None and resume is None  # trained again, from scratch
        assert "training it again" in message
        assert not (tmp_path / "checkpoints").exists()
        assert read_record(tmp_path)["status"] == "running"
    else:
        assert done["status"] == "completed" and "its results are reused" in message
        assert (tmp_path / "checkpoints" / "best.ckpt").read_bytes() == b"old"


def test_a_rerun_on_the_same_code_says_nothing(tmp_path: Path, capsys) -> None:
    same = {"status": "completed", "overrides": {}, "provenance": provenance("32-true")}
    write_record(tmp_path, same)
    assert sweep_job_state(tmp_path, None, {}, True)[0]["status"] == "completed"
    assert "completed on" not in capsys.readouterr().err


def test_a_missing_library_is_not_installed_and_an_old_record_reads_the_same(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    import common.provenance as recorded

    def version(name: str) -> str:
        if name == "transformers":
            raise recorded.PackageNotFoundError(name)
        return "1.0"

    monkeypatch.setattr(recorded, "version", version)
    versions = recorded.library_versions.__wrapped__()  # uncached: the patched lookup
    assert versions["transformers"] == "not installed" and versions["torch"] == "1.0"
    # Records written before "not installed" said "unknown" for a missing library.
    old = {"versions": {"torch": "1.0", "transformers": "unknown"}}
    assert recorded.recorded_versions(old) == {"torch": "1.0", "transformers": "not installed"}
    runs = [_run("a" * 40), _run("a" * 40)]
    runs[0]["versions"] = {**runs[0]["versions"], "transformers": "unknown"}
    runs[1]["versions"] = {**runs[1]["versions"], "transformers": "not installed"}
    assert differing_runs([("0", runs[0]), ("1", runs[1])]) is None  # the same installation
