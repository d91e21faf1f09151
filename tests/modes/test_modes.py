"""What the modes that start from a checkpoint share: each reads it once per command."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
import torch

from modes import MODES
from tests.conftest import ROOT, compose_config


@pytest.mark.parametrize(
    ("mode", "options"),
    [
        ("eval", ()),
        ("generate", ("prompt=The",)),
        ("attention", ("prompt=The",)),
        ("export", ("export.format=safetensors",)),
    ],
)
def test_a_command_reads_its_checkpoint_once(
    tiny_checkpoints, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode, options
) -> None:
    assert checkpoint_reads(tiny_checkpoints["decoder"], tmp_path, monkeypatch, mode, *options)


def checkpoint_reads(
    ckpt: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, mode: str, *options: str
) -> bool:
    """Whether ``mode`` on ``ckpt`` (with ``options``) reads the checkpoint exactly once."""
    from train import run

    reads: list[str] = []
    real_load = torch.load

    def counting_load(f, *args, **kwargs):
        reads.append(str(f))
        return real_load(f, *args, **kwargs)

    monkeypatch.setattr(torch, "load", counting_load)
    out = tmp_path / "out"
    # model.* keys equal to the checkpoint's are checked against it, which once meant a
    # second read; TINY's model keys are on the command line too.
    run(
        compose_config(
            f"mode={mode}",
            f"ckpt_path={ckpt}",
            "model.max_seq_len=64",
            f"output_dir={out}",
            f"export.path={tmp_path / 'weights.safetensors'}",
            *options,
        )
    )
    return reads == [str(ckpt)]


def test_the_readme_layout_lists_every_core_mode_and_the_features_folder() -> None:
    readme = (ROOT / "README.md").read_text()
    (line,) = [line for line in readme.splitlines() if line.startswith("train.py ")]
    listed = re.search(r"\[mode=([a-z|]+)\]", line).group(1).split("|")
    assert listed == list(MODES)
    assert "\nanalysis/ " in readme and "\nfeatures/ " in readme
