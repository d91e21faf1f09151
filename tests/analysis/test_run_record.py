"""The run record (``analysis/run_record.py``): the one product module that names its file, the
one builder whose JSON is key for key and value for value what tinylm always wrote, statuses
compared as ``Status`` members, and older records read as they are."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import pytest

from analysis.records import DamagedRecord
from analysis.run_record import (
    FIELDS,
    FINISHED,
    Status,
    collect_runs,
    has_record,
    read_record,
    read_run,
    record_path,
    run_record,
    write_record,
)
from tests.conftest import ROOT

NOT_PRODUCT = ("tests", "bench", "docs")
LITERAL = "metrics" + ".json"  # spelled apart: this file is a test, but say it once
OWNER = "analysis/run_record.py"


def product_modules(root: Path) -> list[Path]:
    """Every .py file of the product below ``root``: not tests, bench or docs, nothing hidden
    (.venv, .git)."""
    return sorted(
        path
        for path in root.rglob("*.py")
        if not any(part.startswith(".") for part in path.relative_to(root).parts)
        and path.relative_to(root).parts[0] not in NOT_PRODUCT
    )


def naming_the_file(root: Path) -> list[str]:
    """The product modules below ``root`` whose text holds the record's file name."""
    return [
        path.relative_to(root).as_posix()
        for path in product_modules(root)
        if LITERAL in path.read_text(encoding="utf-8")
    ]


def test_one_product_module_names_the_record_file() -> None:
    assert (ROOT / OWNER).is_file() and (ROOT / "train.py").is_file()  # ROOT: the checkout
    assert len(product_modules(ROOT)) > 50
    assert naming_the_file(ROOT) == [OWNER]


def test_the_file_check_fails_on_a_second_module(tmp_path: Path) -> None:
    for name, text in {
        OWNER: f'_FILE = "{LITERAL}"\n',
        "modes/train.py": f"# writes {LITERAL}\n",
        "tests/test_x.py": f'"{LITERAL}"\n',  # tests, bench and docs may name it
        "bench/x.py": f'"{LITERAL}"\n',
        ".venv/lib/x.py": f'"{LITERAL}"\n',
    }.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(text)
    assert naming_the_file(tmp_path) == [OWNER, "modes/train.py"]


STATUS_VALUES = {status.value for status in Status}


def status_literals(path: Path) -> list[int]:
    """Lines of ``path`` that compare something with a status spelled as a string
    (``== "completed"``, ``in ("completed", "pruned")``) rather than a ``Status`` member."""
    found: list[int] = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if not isinstance(node, ast.Compare):
            continue
        for operand in [node.left, *node.comparators]:
            items = operand.elts if isinstance(operand, ast.Tuple | ast.List | ast.Set) else []
            for item in [operand, *items]:
                if isinstance(item, ast.Constant) and item.value in STATUS_VALUES:
                    found.append(node.lineno)
    return sorted(set(found))


def test_statuses_are_compared_as_members() -> None:
    spelled = {
        path.relative_to(ROOT).as_posix(): lines
        for path in [*product_modules(ROOT), *sorted((ROOT / "bench").rglob("*.py"))]
        if (lines := status_literals(path))
    }
    assert spelled == {}


def test_the_status_check_finds_a_spelled_status(tmp_path: Path) -> None:
    module = tmp_path / "m.py"
    module.write_text(
        'ok = r.get("status") == Status.COMPLETED\n'
        'a = r.get("status") == "completed"\n'
        'b = status in ("completed", "pruned")\n'
        'c = "failed" != r["status"]\n'
    )
    assert status_literals(module) == [2, 3, 4]


def test_a_status_is_its_string_in_json_and_in_text() -> None:
    assert json.dumps({"status": Status.PRUNED}, indent=2) == json.dumps(
        {"status": "pruned"}, indent=2
    )
    assert f"{Status.COMPLETED}" == str(Status.COMPLETED) == "completed"
    assert Status("interrupted") is Status.INTERRUPTED
    assert "completed" in FINISHED and "pruned" in FINISHED and "failed" not in FINISHED
    assert {"completed": 1}[Status.COMPLETED] == 1  # a read status and a member are one key


def test_a_trained_record_is_what_train_always_wrote() -> None:
    """Key for key, in order, the dict modes/train.py built by hand."""
    values = {
        "arch": "gpt",
        "step": 20,
        "best_val_loss": 5.1,
        "val_loss": 5.2,
        "val_ppl": 181.3,
        "val_bpc": None,
        "val_bpb": 1.9,
        "val_acc": 0.1,
        "tokens_per_sec": 1000.0,
        "train_seconds": 2.5,
        "consumed": {"steps": 20, "tokens": 640, "flops": 1e6, "seconds": 2.0},
        "flops_per_token": 1562,
        "started_at": 1.0,
        "finished_at": 2.0,
        "threads": 2,
        "best_ckpt": "checkpoints/best.ckpt",
        "val_curve": [[10, 5.5, 320, 1.0], [20, 5.2, 640, 2.0]],
        "overrides": {"trainer.max_steps": "20"},
        "config": {"model.arch": "gpt"},
        "provenance": {"code": "abc"},
        "params": 100,
        "params_with_embeddings": 200,
    }
    shuffled = dict(reversed(values.items()))
    record = run_record(Status.COMPLETED, **shuffled)
    expected = {"status": "completed", **values}
    assert json.dumps(record, indent=2) == json.dumps(expected, indent=2)
    record["sample"] = "once upon"  # the closing sample, added after the first write
    assert list(record)[-1] == "sample"


def test_a_fine_tune_record_is_what_finetune_always_wrote() -> None:
    """Key for key, in order, the dict modes/finetune_checkpoint.py built by hand: its scores
    (val_/test_ metrics, loss first) after best_val_loss, the confusions after them."""
    head = {
        "mode": "finetune",
        "arch": "bert",
        "task": "sst2",
        "init": "pretrained",
        "seed": 1,
        "pretrained": "/run/checkpoints/best.ckpt",
        "metric": "accuracy",
        "problem": "classification",
        "label_names": ["negative", "positive"],
        "n": {"train": 8, "val": 2, "test": 2},
        "step": 4,
        "best_val_loss": 0.69,
    }
    scores = {"val_loss": 0.69, "val_accuracy": 0.5, "test_loss": 0.7, "test_accuracy": 0.5}
    tail = {
        "val_confusion": [[1, 0], [1, 0]],
        "test_confusion": [[1, 0], [0, 1]],
        "examples_per_sec": 80.0,
        "seconds_per_epoch": 0.1,
        "started_at": 1.0,
        "finished_at": 2.0,
        "threads": 2,
        "best_ckpt": "out/checkpoints/best.ckpt",
        "overrides": {},
        "config": {"finetune.task": "sst2"},
        "provenance": {"code": "abc"},
    }
    record = run_record(Status.COMPLETED, scores=scores, **tail, **head)
    expected = {"status": "completed", **head, **scores, **tail}
    assert json.dumps(record, indent=2) == json.dumps(expected, indent=2)


@pytest.mark.parametrize(
    ("status", "fields", "expected"),
    [
        (Status.RUNNING, {"overrides": {"a": "1"}}, ["status", "overrides"]),
        (
            Status.FAILED,
            {"provenance": {}, "overrides": {}, "error": "boom"},
            ["status", "error", "overrides", "provenance"],
        ),
        (
            Status.INTERRUPTED,
            {"overrides": {}, "provenance": {}, "resume_ckpt": "x.ckpt", "step": 3},
            ["status", "step", "resume_ckpt", "overrides", "provenance"],
        ),
    ],
)
def test_the_short_records_keep_their_order(
    status: Status, fields: dict, expected: list[str]
) -> None:
    assert list(run_record(status, **fields)) == expected


def test_the_builder_refuses_what_a_record_does_not_hold() -> None:
    with pytest.raises(TypeError, match="no field val_los"):
        run_record(Status.COMPLETED, val_los=1.0)
    with pytest.raises(TypeError, match="val_loss"):
        run_record(Status.COMPLETED, scores={"val_loss": 1.0}, val_loss=1.0)
    with pytest.raises(TypeError, match="accuracy"):
        run_record(Status.COMPLETED, scores={"accuracy": 1.0})
    with pytest.raises(ValueError):
        run_record("finished")  # type: ignore[arg-type]
    assert FIELDS[0] == "status" and len(set(FIELDS)) == len(FIELDS)


def test_written_and_read_back(tmp_path: Path) -> None:
    assert read_record(tmp_path) is None and not has_record(tmp_path)
    record = run_record(Status.COMPLETED, step=3, best_val_loss=1.5, overrides={"seed": "1"})
    written = write_record(tmp_path, record)
    assert written == record_path(tmp_path) and has_record(tmp_path)
    assert record_path().name == LITERAL
    assert written.read_text() == json.dumps(
        {"status": "completed", "step": 3, "best_val_loss": 1.5, "overrides": {"seed": "1"}},
        indent=2,
    )
    assert read_record(tmp_path) == record
    assert read_record(tmp_path)["status"] == Status.COMPLETED


def test_an_older_record_reads_as_it_is(tmp_path: Path) -> None:
    """Fields were added over time: a record without them, with [step, loss] curve points
    and no provenance, reads unchanged, and its sweep still collects it."""
    old = {"status": "completed", "best_val_loss": 2.0, "val_curve": [[10, 2.5], [20, 2.0]]}
    (tmp_path / "0").mkdir()
    record_path(tmp_path / "0").write_text(json.dumps(old))
    assert read_record(tmp_path / "0") == old
    assert collect_runs(tmp_path) == [{"run": "0", **old}]


def test_a_damaged_record_is_named_or_read_as_failed(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    record_path(tmp_path).write_text('{"status": 3}')
    with pytest.raises(DamagedRecord, match="its status is 3, not text"):
        read_record(tmp_path)
    failed = read_run(tmp_path, "it is left out")
    assert failed is not None and failed["status"] == Status.FAILED
    assert list(failed) == ["status", "error"] and "damaged" in failed["error"]
    assert "it is left out" in capsys.readouterr().err
