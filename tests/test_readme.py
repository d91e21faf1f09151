"""The README's ``python train.py ...`` commands parse and compose as written.

Running them all would take an hour; what breaks when pasted is almost always the command line
itself (Hydra's override grammar, a renamed key or group), which this checks in a second.
"""

from __future__ import annotations

import re
import shlex

import pytest
from hydra import compose, initialize_config_dir
from hydra.core.override_parser.overrides_parser import OverridesParser

from tests.conftest import ROOT
from train import verbatim_prompt


def _readme_commands() -> list[str]:
    text = (ROOT / "README.md").read_text()
    blocks = re.findall(r"```bash\n(.*?)```", text, flags=re.S)
    commands = []
    for block in blocks:
        for line in block.splitlines():
            line = line.split(" && ")[-1].strip()  # the quick-start line installs first
            if line.startswith(("python train.py", "srun python train.py")):
                commands.append(line)
    return commands


COMMANDS = _readme_commands()


def test_readme_has_the_promised_commands() -> None:
    joined = "\n".join(COMMANDS)
    for needle in (
        "python train.py\n",
        "model=bert",
        "-m model.num_heads=1,2,4,8",
        "mode=eval",
        "mode=generate",
        "mode=attention",
        "ckpt_path=",
        "experiment=shakespeare_char",
        "trainer=ddp",
    ):
        assert needle in joined + "\n", needle


@pytest.mark.parametrize("command", COMMANDS)
def test_readme_command_parses_and_composes(command: str) -> None:
    argv = shlex.split(command.split("  #")[0])
    overrides = verbatim_prompt(argv[argv.index("train.py") + 1 :])  # as train.py does
    multirun = "-m" in overrides
    overrides = [o for o in overrides if o != "-m"]
    parsed = OverridesParser.create().parse_overrides(overrides)  # raises on bad grammar
    if multirun:
        assert any(o.is_sweep_override() for o in parsed)
        return
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(config_name="config", overrides=[*overrides, "output_dir=unused"])
    assert cfg.mode in ("train", "eval", "generate", "attention", "export")
