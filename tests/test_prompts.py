"""Prompts are taken verbatim from the command line: ``prompt=TEXT`` as one shell word."""

from __future__ import annotations

import pytest

from tests.conftest import train_py
from train import verbatim_prompt

# Each is a character Hydra's override grammar gives a meaning: brackets, commas, '=',
# quotes, backslashes, interpolations, braces, a trailing backslash.
PROMPTS = [
    "The [MASK] is, as ever, = good",
    "it's \"quoted\" and 'single'",
    "C:\\path\\to\\ and \\' and \\${x} and ${oc.env:HOME}",
    "{a: 1} [1, 2] key=value, null",
    "ends with a backslash\\",
    "line one\nline two\ttabbed  ",
    "42",
    "",
]


@pytest.mark.parametrize("prompt", PROMPTS)
def test_prompt_reaches_the_config_as_typed(prompt, make_cfg) -> None:
    (arg,) = verbatim_prompt([f"prompt={prompt}"])
    assert make_cfg(arg).prompt == prompt


def test_other_arguments_and_already_quoted_prompts_are_left_alone() -> None:
    args = ["-m", "model.num_heads=1,2", "+prompt=x", 'prompt="The [MASK] is."']
    assert verbatim_prompt(args) == args
    assert verbatim_prompt(["prompt='a' b 'c'"]) == ["prompt='\\'a\\' b \\'c\\''"]


def test_verbatim_prompts_through_train_py(tiny_checkpoints, tmp_path) -> None:
    """generate (fill-mask and continuation), through the real entry point."""
    prompt = "The [MASK] is, as ever, = good"
    run_dir = f"hydra.run.dir={tmp_path / 'run'}"
    encoder, decoder = tiny_checkpoints["encoder"], tiny_checkpoints["decoder"]
    proc = train_py(
        "logger=none",
        "mode=generate",
        f"ckpt_path={encoder}",
        f"prompt={prompt}",
        run_dir,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.splitlines()[0] == prompt
    assert "[MASK] #1:" in proc.stdout

    text = 'it\'s "x" = {y}, [z] ${w}'
    proc = train_py(
        "logger=none",
        "mode=generate",
        f"ckpt_path={decoder}",
        f"prompt={text}",
        "max_new_tokens=3",
        "temperature=0",
        run_dir,
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(text)  # byte-level BPE decodes the prompt exactly
