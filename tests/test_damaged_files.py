"""Damaged and mistaken files answered in one step: an unreadable line of eval.jsonl is kept
and never blocks a new record, a damaged metrics.json is a failed run of its sweep, and a file
that is no checkpoint at all is named by what it looks like."""

from __future__ import annotations

import csv
import json
import random
import shutil
import zipfile
from pathlib import Path

import pytest
import torch
from safetensors.torch import save_file

from analysis.records import DamagedRecord, append_records
from analysis.run_record import read_record, write_record
from analysis.sweep_summary import write_sweep_summary
from modes import SweepConflict
from modes.eval import by_configuration
from modes.train import sweep_job_state
from tests.conftest import train_py
from train import execute, run
from training.checkpoint import read_checkpoint

# A record whose last line was cut short by a crash (no newline after it either).
CUT_LINE = '{"checkpoint": "/old/best.ckpt", "loss": 2.3'
OTHER_RECORD = json.dumps({"checkpoint": "/other/best.ckpt", "data": "x", "loss": 1.0})


def _warnings(stderr: str) -> list[str]:
    return [line for line in stderr.splitlines() if line.startswith("tinylm: warning:")]


@pytest.fixture
def ckpt_copy(tiny_ckpt: Path, tmp_path: Path) -> Path:
    """The session's checkpoint copied into a directory of its own, so eval.jsonl lands there."""
    copy = tmp_path / "ckpts" / "last.ckpt"
    copy.parent.mkdir()
    shutil.copy(tiny_ckpt, copy)
    return copy


# --------------------------------------------------------------------------- eval.jsonl


def test_a_cut_line_of_eval_jsonl_is_kept_and_the_new_record_added(
    ckpt_copy: Path, make_cfg, capsys
) -> None:
    records = ckpt_copy.parent / "eval.jsonl"
    records.write_text(f"{OTHER_RECORD}\n{CUT_LINE}")
    run(make_cfg("mode=eval", f"ckpt_path={ckpt_copy}"))
    lines = records.read_text().splitlines()
    assert lines[:2] == [OTHER_RECORD, CUT_LINE]
    assert len(lines) == 3 and json.loads(lines[2])["checkpoint"] == str(ckpt_copy.resolve())
    warnings = _warnings(capsys.readouterr().err)
    assert len(warnings) == 1
    assert f"{records} line 2 is not a JSON record" in warnings[0]
    assert "kept as it is" in warnings[0]


def test_replacing_a_record_keeps_the_unreadable_line(ckpt_copy: Path, make_cfg, capsys) -> None:
    records = ckpt_copy.parent / "eval.jsonl"
    run(make_cfg("mode=eval", f"ckpt_path={ckpt_copy}"))
    first = records.read_text().splitlines()
    assert len(first) == 1
    records.write_text(f"{CUT_LINE}\n{first[0]}\n{OTHER_RECORD}\n")
    capsys.readouterr()
    run(make_cfg("mode=eval", f"ckpt_path={ckpt_copy}"))  # the same evaluation: replaced
    lines = records.read_text().splitlines()
    assert lines[:2] == [CUT_LINE, OTHER_RECORD]
    assert len(lines) == 3 and json.loads(lines[2])["loss"] == json.loads(first[0])["loss"]
    assert [f"{records} line 1" in w for w in _warnings(capsys.readouterr().err)] == [True]


def test_every_unreadable_line_survives_byte_for_byte_in_one_warning(tmp_path, capsys) -> None:
    records = tmp_path / "eval.jsonl"
    unreadable = [b"[1, 2]", b'{"loss": \xff\xfe}', CUT_LINE.encode()]
    records.write_bytes(b"\n".join([unreadable[0], b"", OTHER_RECORD.encode(), *unreadable[1:]]))
    append_records(records, [{"checkpoint": "new"}], identity=lambda r: r["checkpoint"])
    assert records.read_bytes().split(b"\n") == [
        unreadable[0],
        OTHER_RECORD.encode(),
        *unreadable[1:],
        b'{"checkpoint": "new"}',
        b"",
    ]
    (warning,) = _warnings(capsys.readouterr().err)
    assert f"{records} lines 1, 4, 5 are not JSON records (line 1: a JSON list" in warning


# --------------------------------------------------------------------------- metrics.json

DAMAGE = {
    "truncated": ('{"status": "completed", "best_val_loss": 2.', "not valid JSON"),
    "not an object": ("[2.5]", "a JSON list, not an object"),
    "a loss as text": ('{"status": "completed", "best_val_loss": "low"}', "not a number"),
    "overrides as text": ('{"status": "completed", "overrides": "seed=1"}', "not an object"),
    "a broken curve": ('{"status": "completed", "val_curve": [[5]]}', "val_curve is not"),
}


def _sweep(root: Path, damaged: str) -> Path:
    """Jobs 0 and 1 completed (heads 1 and 2); job 2 (heads 2) left ``damaged`` text."""
    for job, (heads, loss) in enumerate((("1", 2.3), ("2", 2.0))):
        curve = [[5, loss + 1.0], [10, loss]]
        overrides = {"model.num_heads": heads, "logger": "none"}
        record = {"status": "completed", "best_val_loss": loss, "overrides": overrides}
        write_record(root / str(job), {**record, "val_curve": curve})
    (root / "2").mkdir()
    (root / "2" / "metrics.json").write_text(damaged)
    return root


@pytest.mark.parametrize("text, problem", DAMAGE.values(), ids=DAMAGE)
def test_a_damaged_metrics_json_is_a_failed_run_of_the_summary(
    tmp_path: Path, capsys, text: str, problem: str
) -> None:
    sweep = _sweep(tmp_path, text)
    damaged = sweep / "2" / "metrics.json"
    write_sweep_summary(sweep)
    (warning,) = _warnings(capsys.readouterr().err)
    assert f"{damaged} is damaged" in warning and problem in warning
    assert "the run counts as failed" in warning
    with open(sweep / "runs.csv") as f:
        runs = {row["run"]: row for row in csv.DictReader(f)}
    assert runs["2"]["status"] == "failed" and str(damaged) in runs["2"]["error"]
    with open(sweep / "summary.csv") as f:
        configs = list(csv.DictReader(f))
    # Its settings are unknown: a row of its own, failed; the completed ones are as they were.
    assert [(c["model.num_heads"], c["n"], c["failed"]) for c in configs] == [
        ("1", "1", "0"),
        ("2", "1", "0"),
        ("None", "0", "1"),
    ]
    assert "| None | 0 | 1 | failed |" in (sweep / "summary.md").read_text()
    assert damaged.read_text() == text  # nothing saved is lost


def test_eval_over_a_sweep_groups_past_a_damaged_metrics_json(tmp_path: Path, capsys) -> None:
    sweep = _sweep(tmp_path, DAMAGE["truncated"][0])
    rows = [
        {"checkpoint": str(sweep / job / "checkpoints" / "best.ckpt"), "loss": loss}
        for job, loss in (("0", 2.3), ("1", 2.0), ("2", 2.1))
    ]
    table = by_configuration(rows)
    assert "| 1 | 1 | 0 | 2.3000 |" in table and "| 2 | 1 | 0 | 2.0000 | best |" in table
    (warning,) = _warnings(capsys.readouterr().err)
    assert f"{sweep / '2' / 'metrics.json'} is damaged" in warning
    assert "grouped without its settings" in warning


def test_a_sweep_rerun_stops_at_a_damaged_metrics_json_and_keeps_it(tmp_path: Path) -> None:
    sweep = _sweep(tmp_path, DAMAGE["truncated"][0])
    with pytest.raises(SweepConflict, match=r"2/metrics.json is damaged .*delete that file"):
        sweep_job_state(sweep / "2", None, {"model.num_heads": "2", "logger": "none"})
    assert (sweep / "2" / "metrics.json").read_text() == DAMAGE["truncated"][0]
    with pytest.raises(DamagedRecord, match="line 1 column"):
        read_record(sweep / "2")


# --------------------------------------------------------------------------- not a checkpoint


class Custom:
    """An object only code can rebuild: its pickle names this class."""


def _safetensors(path: Path) -> Path:
    save_file({"weight": torch.zeros(2, 2)}, str(path))
    return path


def _not_checkpoints(root: Path) -> dict[str, tuple[Path, str]]:
    """Each kind of file users pass by mistake, in a run directory whose
    checkpoints/best.ckpt needs code to load, with what its message must say."""
    run_dir = root / "run"
    (run_dir / "hf").mkdir(parents=True)
    (run_dir / "hf" / "config.json").write_text('{"model_type": "gpt2"}')
    _safetensors(run_dir / "hf" / "model.safetensors")
    files = {
        "random.bin": b"\x13\x37" + random.Random(0).randbytes(254),  # no zip or pickle start
        "tokenizer.json": b'{"version": "1.0", "added_tokens": [], "model": {}}',
        "config.yaml": b"model:\n  arch: decoder\n",
        "empty.ckpt": b"",
    }
    for name, data in files.items():
        (run_dir / name).write_bytes(data)
    with zipfile.ZipFile(run_dir / "notes.zip", "w") as archive:
        archive.writestr("notes.txt", "not weights")
    (run_dir / "checkpoints").mkdir()
    torch.save({"state_dict": {}, "extra": Custom()}, run_dir / "checkpoints" / "best.ckpt")
    return {
        "random bytes": (run_dir / "random.bin", "is not a checkpoint: it holds binary data"),
        "tokenizer": (run_dir / "tokenizer.json", "is a tokenizer (tokenizer.json, JSON text)"),
        "yaml": (run_dir / "config.yaml", "is a YAML text file, not a checkpoint"),
        "zip": (run_dir / "notes.zip", "is a zip archive of other files (notes.txt)"),
        "empty": (run_dir / "empty.ckpt", "is empty (0 bytes), not a checkpoint"),
        "safetensors": (_safetensors(run_dir / "w.safetensors"), "is a safetensors file"),
        "hf folder": (run_dir / "hf", "is a Hugging Face export folder"),
        "custom class": (run_dir / "checkpoints" / "best.ckpt", "pickled Python objects"),
    }


@pytest.mark.parametrize(
    "kind",
    ["random bytes", "tokenizer", "yaml", "zip", "empty", "safetensors", "hf folder"],
)
@pytest.mark.parametrize("mode", ["generate", "eval"])
def test_a_file_that_is_no_checkpoint_is_named_as_such(
    tmp_path: Path, make_cfg, capsys, kind: str, mode: str
) -> None:
    path, said = _not_checkpoints(tmp_path)[kind]
    with pytest.raises(SystemExit) as stopped:
        execute(make_cfg(f"mode={mode}", f"ckpt_path={path}"))
    assert stopped.value.code == 1
    (line,) = capsys.readouterr().err.splitlines()
    assert line.startswith(f"tinylm: error: {path} {said}")
    assert "arbitrary code" not in line
    exported = kind in ("safetensors", "hf folder")
    instead = "pass the .ckpt it was exported from, a" if exported else "pass a"
    assert line.endswith(f"{instead} checkpoint file such as {tmp_path}/run/checkpoints/best.ckpt")


@pytest.mark.parametrize("export", ["best.safetensors", "best-hf"])
def test_an_export_names_the_checkpoint_it_came_from(tmp_path: Path, export: str) -> None:
    for name in ("another.ckpt", "best.ckpt"):
        (tmp_path / name).write_bytes(b"")
    if export.endswith("-hf"):
        (tmp_path / export).mkdir()
        (tmp_path / export / "config.json").write_text("{}")
        _safetensors(tmp_path / export / "model.safetensors")
    else:
        _safetensors(tmp_path / export)
    with pytest.raises(ValueError) as refused:
        read_checkpoint(tmp_path / export)
    assert str(refused.value).endswith(
        f"exported from, a checkpoint file such as {tmp_path}/best.ckpt"
    )


def test_a_checkpoint_that_needs_code_still_gets_the_pickle_message(
    tmp_path: Path, make_cfg, capsys
) -> None:
    path, said = _not_checkpoints(tmp_path)["custom class"]
    with pytest.raises(SystemExit):
        execute(make_cfg("mode=generate", f"ckpt_path={path}"))
    err = capsys.readouterr().err
    assert err.startswith(f"tinylm: error: refusing to load {path}: it contains {said}")


def test_random_bytes_through_train_py_give_one_line(tmp_path: Path) -> None:
    path, said = _not_checkpoints(tmp_path)["random bytes"]
    proc = train_py("mode=generate", f"ckpt_path={path}", "logger=none", cwd=tmp_path)
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert proc.stderr.strip().splitlines() == [
        line for line in proc.stderr.splitlines() if line.startswith("tinylm: error:")
    ]
    assert said in proc.stderr and "arbitrary code" not in proc.stderr
