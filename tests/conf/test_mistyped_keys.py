"""A mistyped key or group choice on the command line gets tinylm's one line with the
did-you-mean first (``conf/command_line.py``), in every group, with or without ``+``, on a
single run or a sweep, before Hydra composes: a sweep starts no job."""

from __future__ import annotations

import re

import pytest

from conf.command_line import check_command_line
from tests.conftest import TINY, train_py

# (the command line's words, the message)
MISTYPED = [
    (["model.num_head=4"], r"model.num_head \(did you mean model.num_heads\?\)"),
    (["data.batchsize=4"], r"data.batchsize \(did you mean data.batch_size\?\)"),
    (["trainer.max_step=4"], r"trainer.max_step \(did you mean trainer.max_steps\?\)"),
    (["optim.warmup=4"], r"optim.warmup \(did you mean optim.warmup_steps\?\)"),
    (["eval.strid=4"], r"eval.strid \(did you mean eval.stride\?\)"),
    (["export.fromat=hf"], r"export.fromat \(did you mean export.format\?\)"),
    (["logger.projet=x"], r"logger.projet \(did you mean logger.project\?\)"),
    (["temprature=0"], r"key\(s\) temprature \(did you mean temperature\?\)"),
    # The groups in name order: a feature's group may come before the core's "data".
    (["modle.num_heads=4"], r"key\(s\) modle \(did you mean model\?\); valid keys: (\w+, )*data, "),
    (["+model.num_head=4"], r"model.num_head \(did you mean model.num_heads\?\)"),
    (["++data.batchsize=4"], r"data.batchsize \(did you mean data.batch_size\?\)"),
    (["~optim.muon_lrr"], r"optim.muon_lrr \(did you mean optim.muon_lr\?\)"),
    (["+temprature=0"], r"key\(s\) temprature \(did you mean temperature\?\)"),
    (["-m", "model.num_head=4"], r"model.num_head \(did you mean model.num_heads\?\)"),
    (["-m", "model.num_head=1,2"], r"model.num_head \(did you mean model.num_heads\?\)"),
    (["-m", "optim.lrr=range(1,3)"], r"optim.lrr \(did you mean optim.lr\?\)"),
    (["trainer.gpus=1"], r"unknown key\(s\) trainer.gpus; valid keys: accelerator, devices"),
    # Every unknown key of the group in one line; valid keys earlier on the line pass.
    (
        ["model.num_heads=2", "model.num_head=4", "model.hiden_size=8"],
        r"key\(s\) model.num_head \(did you mean model.num_heads\?\), model.hiden_size "
        r"\(did you mean model.hidden_size\?\); valid keys: vocab_size, arch",
    ),
    # Hydra's flags are not keys.
    (["--cfg", "job", "data.colum=x"], r"data.colum \(did you mean data.text_column\?\)"),
    # A retired key is named with what replaced it, not with a look-alike.
    (
        ["data.stream_tokenizer_examples=5"],
        r"data.stream_tokenizer_examples \(retired: use data.tokenizer_sample_bytes=BYTES",
    ),
]

WRONG_CHOICE = [
    (["model=gtp"], r"model=gtp is unknown \(did you mean model=gpt\?\); choose one of: bert, gpt"),
    (["trainer=gpuu"], r"trainer=gpuu is unknown \(did you mean trainer=gpu\?\); .*cpu_ddp"),
    (["data=wikitext"], r"data=wikitext is unknown \(did you mean data=wikitext2\?\)"),
    (["-m", "model=gpt,bret"], r"model=bret is unknown \(did you mean model=bert\?\)"),
    (["experiment=shakespeare"], r"experiment=shakespeare is unknown .*shakespeare_char_fast"),
    (["logger=mlflow"], r"logger=mlflow is unknown; choose one of: csv, none, tensorboard, wandb"),
]

VALID = [
    [*TINY, "model=bert", "+data.path.train=a.txt", "~optim.muon_lr", "++seed=3"],
    ["-m", "model=gpt,bert", "model.dropout=0.0,0.1", "seed=range(0,3)", "data=glob(*)"],
    ["experiment=shakespeare_char_fast", "eval.stride=8", "export.format=hf", "+prompt=x"],
    # Hydra's own keys and groups pass untouched, as does a syntax error (Hydra names it).
    ["hydra/launcher=joblib", "hydra.launcher.n_jobs=2", "hydra.job.nmae=x", "+hydra.foo=1"],
    ["model.num_heads=[1"],
    ["--help"],
    ["-sc", "install=bash"],
]


@pytest.mark.parametrize(
    ("argv", "message"),
    [*MISTYPED, *WRONG_CHOICE],
    ids=[" ".join(a) for a, _ in [*MISTYPED, *WRONG_CHOICE]],
)
def test_a_mistyped_key_or_choice_is_named_with_its_fix(argv, message) -> None:
    with pytest.raises(ValueError) as err:
        check_command_line(argv)
    assert re.search(message, str(err.value)), str(err.value)
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("argv", VALID, ids=[" ".join(a) for a in VALID])
def test_valid_command_lines_pass(argv) -> None:
    check_command_line(argv)


def test_a_features_moved_and_list_keys_apply_to_the_command_line(monkeypatch) -> None:
    """A feature that took a core key over has it named with its replacement, and its list
    keys are read as one list (``Feature.moved_keys``, ``Feature.list_keys``): planted here,
    so the rule holds whichever feature folders there are."""
    import conf.features

    planted = conf.features.Feature(
        name="planted", moved_keys={"eval.old": "mode=new new.key=X"}, list_keys=("new.items",)
    )
    monkeypatch.setattr(conf.features, "features", lambda: (planted,))
    with pytest.raises(ValueError, match=r"^unknown key\(s\) eval.old \(retired: use mode=new "):
        check_command_line(["eval.old=1"])
    args = ["new.items=a,b", "new.items='a,b'", "new.items=[a,b]", "new.items=a", "other=a,b"]
    assert conf.features.comma_lists(args) == ["new.items=[a,b]", *args[1:]]


def test_group_choices_come_from_the_config_dir_too(tmp_path) -> None:
    (tmp_path / "model").mkdir()
    (tmp_path / "model" / "tiny.yaml").write_text("{}")
    check_command_line(["--config-dir", str(tmp_path), "model=tiny"])
    with pytest.raises(ValueError, match=r"choose one of: bert, gpt, tiny"):
        check_command_line(["--config-dir", str(tmp_path), "model=tinyy"])


@pytest.mark.parametrize(
    ("argv", "expected"),
    [
        (["model.num_head=4"], "did you mean model.num_heads?"),
        (["+model.num_head=4"], "did you mean model.num_heads?"),
        (["-m", "model.num_head=1,2"], "did you mean model.num_heads?"),
        (["-m", "model=gtp,bert"], "model=gtp is unknown (did you mean model=gpt?)"),
    ],
    ids=lambda v: " ".join(v) if isinstance(v, list) else "",
)
def test_train_py_answers_in_one_line_and_starts_no_job(tmp_path, argv, expected) -> None:
    sweep = tmp_path / "sweep"
    run = tmp_path / "run"
    proc = train_py(*argv, f"hydra.sweep.dir={sweep}", f"hydra.run.dir={run}", cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr[-2000:]
    assert proc.stderr.startswith("tinylm: error: ") and expected in proc.stderr, proc.stderr
    assert proc.stderr.count("\n") == 1 and not proc.stdout  # the one line, nothing else
    assert not sweep.exists() and not run.exists()  # no job, not even job 0, started


def test_train_py_still_shows_the_config_of_valid_overrides(tmp_path) -> None:
    proc = train_py("--cfg", "job", "model=bert", "model.num_heads=4", "+prompt=x", cwd=tmp_path)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert "num_heads: 4" in proc.stdout and "arch: encoder" in proc.stdout
