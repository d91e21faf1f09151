"""Inputs that used to go wrong quietly or with a bare trace: a labelled file that is not
UTF-8, heads.* given to a mode that does not read it, W&B's deprecation warning on every run,
and the README's list of modes."""

from __future__ import annotations

import re

import pytest

from features.finetune.labelled import load_task
from tests.conftest import TINY, train_py


@pytest.mark.parametrize("suffix", [".jsonl", ".csv"])
def test_a_labelled_file_that_is_not_utf8_is_named_with_its_problem(tmp_path, suffix) -> None:
    path = tmp_path / f"latin1{suffix}"
    rows = (
        ['{"text": "caf\xe9", "label": "a"}\n']
        if suffix == ".jsonl"
        else ["text,label\n", "caf\xe9,a\n"]
    )
    path.write_bytes("".join(rows).encode("latin-1"))
    with pytest.raises(ValueError) as err:
        load_task("files", path=str(path))
    message = str(err.value)
    assert "\n" not in message, message
    assert re.match(
        rf"{re.escape(str(path))} is not UTF-8 text: (invalid continuation byte|unexpected end "
        rf"of data) \(byte b'\\xe9' on line {len(rows)}\); save it as UTF-8, e\.g\. iconv -f "
        r"latin1 -t utf-8",
        message,
    ), message


def test_wandb_runs_without_the_anonymous_deprecation_warning(tmp_path) -> None:
    proc = train_py(
        *TINY,
        "logger=wandb",
        "trainer.max_steps=2",
        "trainer.val_check_interval=2",
        f"output_dir={tmp_path / 'run'}",
        cwd=tmp_path,
        WANDB_SILENT="false",
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    output = proc.stdout + proc.stderr
    assert "wandb:" in output  # W&B still speaks: nothing of its output is hidden
    assert "anonymous" not in output
