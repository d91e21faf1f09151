"""Bad input: a bad configuration names the key, the value and the fix, before any data is
touched and without a traceback; generation inputs behave as documented."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.conftest import TINY, train_py
from train import run

# --------------------------------------------------------------------------- bad configuration


@pytest.fixture(scope="module")
def bad_files(tmp_path_factory: pytest.TempPathFactory) -> Path:
    where = tmp_path_factory.mktemp("bad-data")
    (where / "empty.txt").write_text("")
    (where / "blank.txt").write_text("\n\n   \n")
    (where / "table.csv").write_text("title,body\nhello,some text here\n")
    return where


# (overrides, the message; "{d}" is the directory of bad_files)
CONFIG_ERRORS = [
    (["model.num_heads=3"], r"num_heads=3; valid head counts for 32: 1, 2, 4, 8, 16, 32"),
    (["model.num_heads=0"], r"num_heads=0 must be a positive integer"),
    (["model.dropout=1.0"], r"dropout=1.0 is outside \[0, 1\)"),
    (["model.dropout=-0.1"], r"dropout=-0.1 is outside \[0, 1\)"),
    (["model.attn_dropout=1.5"], r"attn_dropout=1.5 is outside \[0, 1\)"),
    (["+model.num_head=4"], r"model.num_head \(did you mean model.num_heads\?\)"),
    (
        ["+data.colum=x"],
        r"unknown key\(s\) data.colum \(did you mean data.text_column\?\); valid keys",
    ),
    (["+trainer.gpus=1"], r"unknown key\(s\) trainer.gpus; valid keys"),
    (["+optim.momentum=0.9"], r"unknown key\(s\) optim.momentum"),
    (["+temprature=0"], r"unknown key\(s\) temprature \(did you mean temperature\?\); valid keys"),
    (["model.arch=rnn"], r"arch='rnn' is unknown; choose one of: encoder, decoder"),
    (["model.norm=mid"], r"norm='mid' is unknown"),
    (["data.batch_size=0"], r"data.batch_size=0 must be an integer >= 1"),
    (["data.vocab_size=10"], r"data.vocab_size=10 must be an integer >= 300"),
    (["data.tokenizer=bpee"], r"data.tokenizer='bpee' is not a tokenizer kind"),
    (["trainer.max_steps=0"], r"trainer.max_steps=0"),
    (["trainer.precision=8"], r"trainer.precision=8 is not one of"),
    (["optim.kind=sgd"], r"optim.kind=sgd is unknown; choose optim=adamw or optim=muon"),
    (
        ["optim=adamw", "+optim.muon_lr=0.02"],
        r"optim.muon_lr set with optim=adamw; .* add optim=muon or drop",
    ),
    (["optim=muon", "~optim.muon_lr"], r"optim=muon needs optim.muon_lr; conf/optim/muon.yaml"),
    (["optim=muon", "optim.muon_lr=0"], r"optim.muon_lr=0(\.0)? must be > 0"),
    (["optim=muon", "optim.muon_momentum=1"], r"optim.muon_momentum=1(\.0)? must be in \[0, 1\)"),
    (["optim.lr=0"], r"optim.lr=0(\.0)? must be > 0"),
    (["optim.beta1=1.0"], r"optim.beta1=1.0 must be in \[0, 1\)"),
    (["logger.kind=mlflow"], r"logger=mlflow is unknown; choose logger=wandb, tensorboard"),
    (["mode=fly"], r"mode=fly is unknown; choose one of train, eval, generate"),
    (["mode=eval"], r"mode=eval needs a checkpoint"),
    (["top_p=1.5"], r"top_p=1.5 must be in \(0, 1\]"),
    (["top_p=0"], r"top_p=0(\.0)? must be in \(0, 1\]"),
    (["top_k=-1"], r"top_k=-1 must be >= 0"),
    (["temperature=-1"], r"temperature=-1(\.0)? must be >= 0"),
    (["max_new_tokens=-5"], r"max_new_tokens=-5 must be >= 0"),
    (["data=text", "data.path=/nonexistent/corpus.txt"], r"/nonexistent/corpus.txt"),
    (["data=text", "data.path={d}/empty.txt"], r"empty.txt is an empty file"),
    (["data=text", "data.path={d}/blank.txt"], r"has no text"),
    (
        ["data=text", "data.path={d}/table.csv"],
        r"data.text_column='text' is not a column.*"
        r"\['title', 'body'\]",
    ),
    (
        ["data=text", "data.path={d}/table.csv", "data.text_column=nope"],
        r"data.text_column='nope' is not a column",
    ),
    (["ckpt_path=/nonexistent/last.ckpt"], r"checkpoint /nonexistent/last.ckpt does not exist"),
]


@pytest.mark.parametrize(
    ("overrides", "message"), CONFIG_ERRORS, ids=[" ".join(o) for o, _ in CONFIG_ERRORS]
)
def test_bad_configuration_names_key_value_and_fix(
    make_cfg, bad_files, monkeypatch, overrides, message
) -> None:
    # "before any data is processed": the data module is never built for config errors.
    import data.datamodule

    checks_data = any(o.startswith("data=") for o in overrides)
    if not checks_data:

        def no_data(*args, **kwargs):
            raise AssertionError("data was touched before the configuration was checked")

        monkeypatch.setattr(data.datamodule.LMDataModule, "prepare_data", no_data)
    overrides = [o.format(d=bad_files) for o in overrides]
    with pytest.raises((ValueError, FileNotFoundError)) as err:
        run(make_cfg(*overrides))
    import re

    assert re.search(message, str(err.value)), str(err.value)
    assert "\n" not in str(err.value).strip()  # one paragraph


CLI_ERRORS = [
    (["model=gpt3"], "model=gpt3 is unknown (did you mean model=gpt?); choose one of: bert, gpt"),
    (["model.num_head=4"], "unknown key(s) model.num_head (did you mean model.num_heads?)"),
    (["+data.colum=x"], "unknown key(s) data.colum"),
    (["data=text", "data.path={d}/empty.txt"], "is an empty file"),
]
CLI_ERRORS_SLOW = [
    (["trainer=tpu"], "trainer=tpu is unknown (did you mean trainer=gpu?); choose one of: cpu"),
    (["data=wikitext3"], "data=wikitext3 is unknown (did you mean data=wikitext2?)"),
    (["model.num_heads=3"], "valid head counts for 32"),
    (["data.batch_size=0"], "data.batch_size=0"),
]


@pytest.mark.parametrize(
    ("overrides", "message"),
    [*CLI_ERRORS, *(pytest.param(*case, marks=pytest.mark.slow) for case in CLI_ERRORS_SLOW)],
    ids=[" ".join(o) for o, _ in [*CLI_ERRORS, *CLI_ERRORS_SLOW]],
)
def test_train_py_prints_a_message_not_a_traceback(tmp_path, bad_files, overrides, message) -> None:
    overrides = [o.format(d=bad_files) for o in overrides]
    proc = train_py(*TINY, *overrides, f"hydra.run.dir={tmp_path / 'run'}", cwd=tmp_path)
    assert proc.returncode == 1
    assert message in proc.stderr, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr + proc.stdout


# --------------------------------------------------------------------------- generation input


def _generate(make_cfg, ckpt: Path, *overrides: str) -> str:
    return run(make_cfg("mode=generate", f"ckpt_path={ckpt}", "max_new_tokens=8", *overrides))[
        "text"
    ]


def test_generation_inputs_behave_as_documented(tiny_ckpt, make_cfg, capsys) -> None:
    # An empty prompt starts a new document.
    assert _generate(make_cfg, tiny_ckpt, "prompt=''").strip()
    assert _generate(make_cfg, tiny_ckpt, "prompt=null").strip()
    # temperature=0 is greedy: deterministic, and the same as keeping the single best token.
    greedy = _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=0")
    assert greedy == _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=0", "top_k=7")
    assert greedy == _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=1", "top_k=1")
    # top_k=0 (or null) is off; a top_k above the vocabulary keeps every token: also off.
    off = _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=1", "top_k=0")
    assert off == _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=1", "top_k=null")
    assert off == _generate(make_cfg, tiny_ckpt, "prompt=The", "temperature=1", "top_k=100000")
    # top_p=1 keeps the whole distribution.
    assert off == _generate(
        make_cfg, tiny_ckpt, "prompt=The", "temperature=1", "top_k=0", "top_p=1.0"
    )
    # A prompt longer than the context (32 tokens): the model reads its last 32 tokens.
    long_prompt = " ".join(["The class statement is executed."] * 12)
    capsys.readouterr()
    text = _generate(make_cfg, tiny_ckpt, f"prompt='{long_prompt}'", "temperature=0")
    assert text.startswith(long_prompt) and len(text) > len(long_prompt)
    assert "more than the context of 32" in capsys.readouterr().err
    # max_new_tokens=0 returns the prompt.
    assert _generate(make_cfg, tiny_ckpt, "prompt=The", "max_new_tokens=0") == "The"


def test_prompt_of_unknown_characters_with_a_char_tokenizer(make_cfg, tmp_path, capsys) -> None:
    out = tmp_path / "char"
    run(
        make_cfg(
            "data.tokenizer=char",
            "trainer.max_steps=4",
            "trainer.val_check_interval=4",
            output_dir=out,
        )
    )
    capsys.readouterr()
    text = _generate(make_cfg, out / "checkpoints" / "last.ckpt", "prompt='☃★'")
    assert "'☃', '★'" in capsys.readouterr().err and isinstance(text, str)
    text = _generate(
        make_cfg, out / "checkpoints" / "last.ckpt", "prompt='The ☃ class'", "temperature=0"
    )
    assert text.startswith("The  class")  # the unknown character is left out
