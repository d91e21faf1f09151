"""Faults, bad input and untrusted checkpoints: nothing is lost and every error explains itself.

Interruption and resume, atomic checkpoints, NaN losses, bad configuration, untrusted or
mismatched checkpoints, sweeps that skip and resume, and generation inputs.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
from pathlib import Path

import pytest
import torch

from modes import Interrupted
from tests.conftest import ROOT, TINY, train_py
from tests.faults import NaNAtStep, SignalAtStep
from train import run

# Dropout on, so that resuming exactly needs the RNG states too.
RESUME = ["logger=csv", "model.dropout=0.2", "trainer.max_steps=24", "trainer.val_check_interval=8"]


# --------------------------------------------------------------------------- 1. interruption


# SIGINT in process is slow-marked: Ctrl-C is also proven through train.py below.
# optim=muon: both optimisers' states (Muon's momentum, AdamW's moments) must come back.
@pytest.mark.parametrize("optim", ["adamw", "muon"])
@pytest.mark.parametrize(
    "signum", [signal.SIGTERM, pytest.param(signal.SIGINT, marks=pytest.mark.slow)]
)
def test_interrupted_run_resumes_to_the_same_loss(make_cfg, tmp_path, signum, optim) -> None:
    settings = [*RESUME, f"optim={optim}"]
    full = run(make_cfg(*settings, output_dir=tmp_path / "full"))

    with pytest.raises(Interrupted, match=rf"{signal.Signals(signum).name} at step 11") as err:
        run(make_cfg(*settings, output_dir=tmp_path / "cut"), [SignalAtStep(11, signum)])
    assert err.value.exit_code == 128 + signum
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    assert saved["global_step"] == 11 and "rng_states" in saved
    status = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert status["status"] == "interrupted" and status["resume_ckpt"] == str(last)

    resumed = run(make_cfg(*settings, f"ckpt_path={last}", output_dir=tmp_path / "resumed"))
    assert resumed["step"] == full["step"] == 24
    # Exact to float noise: without the RNG states restored the gap is ~4e-5 (dropout masks).
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(full["best_val_loss"], abs=1e-6)


def test_ctrl_c_through_train_py_saves_and_exits_cleanly(tmp_path: Path) -> None:
    wrapper = (
        "import signal\nfrom tests.faults import SignalAtStep, main_with\n"
        "main_with(SignalAtStep(5, signal.SIGINT))\n"
    )
    proc = train_py(
        *TINY,
        "trainer.max_steps=20",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
        wrapper=wrapper,
    )
    assert proc.returncode == 130, proc.stderr[-2000:]
    assert "Traceback" not in proc.stderr
    lines = [line for line in proc.stderr.splitlines() if line.startswith("tinylm:")]
    assert len(lines) == 1 and "interrupted by SIGINT at step 5" in lines[0], proc.stderr
    last = tmp_path / "run" / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 5


# --------------------------------------------------------------------------- 2. atomic writes


@pytest.fixture(scope="module")
def tiny_ckpt(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """One tiny decoder run (16 steps); returns its checkpoints/last.ckpt."""
    from hydra import compose, initialize_config_dir

    out = tmp_path_factory.mktemp("tiny") / "run"
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        cfg = compose(
            config_name="config",
            overrides=[
                *TINY,
                f"output_dir={out}",
                "trainer.max_steps=16",
                "trainer.val_check_interval=8",
            ],
        )
    run(cfg)
    return out / "checkpoints" / "last.ckpt"


def test_failed_write_leaves_the_previous_checkpoint(
    tiny_ckpt: Path, tmp_path: Path, monkeypatch
) -> None:
    from training.callbacks import AtomicCheckpointIO
    from training.checkpoint import read_checkpoint

    target = tmp_path / "last.ckpt"
    target.write_bytes(tiny_ckpt.read_bytes())
    checkpoint = read_checkpoint(target)
    real_save = torch.save

    def save_then_crash(obj, f, *args, **kwargs):
        f.write(b"half a checkpoint")  # garbage on disk, then the "crash"
        raise OSError("disk full")

    monkeypatch.setattr(torch, "save", save_then_crash)
    with pytest.raises(OSError, match="disk full"):
        AtomicCheckpointIO().save_checkpoint({**checkpoint, "global_step": 99}, target)
    monkeypatch.setattr(torch, "save", real_save)
    assert read_checkpoint(target)["global_step"] == checkpoint["global_step"]
    assert not list(tmp_path.glob("*.tmp"))  # nothing left behind
    AtomicCheckpointIO().save_checkpoint({**checkpoint, "global_step": 99}, target)
    assert read_checkpoint(target)["global_step"] == 99


def test_crash_while_saving_during_training_keeps_last_ckpt(make_cfg, tmp_path, monkeypatch):
    """The trainer writes through AtomicCheckpointIO: a save that dies at step 16 leaves the
    step-8 last.ckpt whole."""
    real_save = torch.save
    calls = []

    def flaky_save(obj, f, *args, **kwargs):
        calls.append(obj.get("global_step") if isinstance(obj, dict) else None)
        if isinstance(obj, dict) and obj.get("global_step") == 16:
            f.write(b"\0" * 100)
            raise OSError("killed mid-write")
        return real_save(obj, f, *args, **kwargs)

    monkeypatch.setattr(torch, "save", flaky_save)
    out = tmp_path / "run"
    with pytest.raises(OSError, match="killed mid-write"):
        run(make_cfg("trainer.max_steps=24", "trainer.val_check_interval=8", output_dir=out))
    monkeypatch.setattr(torch, "save", real_save)
    from training.checkpoint import load_checkpoint

    assert 16 in calls
    assert load_checkpoint(out / "checkpoints" / "last.ckpt").global_step == 8
    assert not list((out / "checkpoints").glob("*.tmp"))


# --------------------------------------------------------------------------- 3. NaN / Inf


def _all_finite(ckpt: Path) -> bool:
    state = torch.load(ckpt, weights_only=True)["state_dict"]
    return all(bool(torch.isfinite(v).all()) for v in state.values() if v.is_floating_point())


def test_nan_loss_stops_with_the_step_and_keeps_the_last_good_checkpoint(
    make_cfg, tmp_path
) -> None:
    out = tmp_path / "run"
    with pytest.raises(FloatingPointError, match=r"at step 10\..*optim\.lr=.*precision"):
        run(
            make_cfg("trainer.max_steps=24", "trainer.val_check_interval=8", output_dir=out),
            [NaNAtStep(10)],
        )
    last = out / "checkpoints" / "last.ckpt"
    assert torch.load(last, weights_only=True)["global_step"] == 8 and _all_finite(last)


def test_nan_weights_at_a_validation_step_are_never_saved(make_cfg, tmp_path) -> None:
    # The weights diverge at step 8, a validation + checkpoint step: the validation loss
    # stops training before ModelCheckpoint writes them.
    out = tmp_path / "run"
    with pytest.raises(FloatingPointError, match=r"validation loss became nan at step 8"):
        run(
            make_cfg("trainer.max_steps=24", "trainer.val_check_interval=8", output_dir=out),
            [NaNAtStep(8)],
        )
    assert not list(out.glob("checkpoints/*.ckpt"))


def test_checkpoint_io_refuses_nan_weights(tiny_ckpt: Path, tmp_path: Path) -> None:
    from training.callbacks import AtomicCheckpointIO

    checkpoint = torch.load(tiny_ckpt, weights_only=True)
    name = next(iter(checkpoint["state_dict"]))
    checkpoint["state_dict"][name] = torch.full_like(checkpoint["state_dict"][name], float("inf"))
    with pytest.raises(FloatingPointError, match=rf"not saving .*{name}.*NaN/Inf"):
        AtomicCheckpointIO().save_checkpoint(checkpoint, tmp_path / "x.ckpt")
    assert not (tmp_path / "x.ckpt").exists()


def test_huge_learning_rate_diverges_with_a_message(make_cfg, tmp_path) -> None:
    out = tmp_path / "run"
    with pytest.raises(FloatingPointError, match=r"optim\.lr=1000000\.0"):
        run(
            make_cfg(
                "optim.lr=1e6",
                "optim.warmup_steps=0",
                "trainer.gradient_clip_val=null",
                "trainer.max_steps=24",
                "trainer.val_check_interval=8",
                output_dir=out,
            )
        )
    for ckpt in out.glob("checkpoints/*.ckpt"):
        assert _all_finite(ckpt), ckpt


# --------------------------------------------------------------------------- 4. bad configuration


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
    (["model=gpt3"], "Available options in 'model'"),
    (["model.num_head=4"], "Key 'num_head' is not in struct"),
    (["+data.colum=x"], "unknown key(s) data.colum"),
    (["data=text", "data.path={d}/empty.txt"], "is an empty file"),
]
CLI_ERRORS_SLOW = [
    (["trainer=tpu"], "Available options in 'trainer'"),
    (["data=wikitext3"], "Available options in 'data'"),
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


# --------------------------------------------------------------------------- 5. checkpoints


class Payload:
    """A class a weights_only load must refuse to build."""

    def __reduce__(self):
        return (os.system, ("echo pwned",))


def test_checkpoint_needing_pickled_code_is_refused(tiny_ckpt, tmp_path, make_cfg) -> None:
    evil = tmp_path / "evil.ckpt"
    checkpoint = torch.load(tiny_ckpt, weights_only=True)
    torch.save({**checkpoint, "extra": Payload()}, evil)
    for mode in ("generate", "eval", "train", "export"):
        with pytest.raises(ValueError, match=r"refusing to load .*arbitrary code"):
            run(make_cfg(f"mode={mode}", f"ckpt_path={evil}"))


@pytest.mark.parametrize("keep", [0, 100, 0.5])
def test_truncated_checkpoint_gives_a_clear_error(tiny_ckpt, tmp_path, make_cfg, keep) -> None:
    data = tiny_ckpt.read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(ValueError, match=r"truncated or not a PyTorch checkpoint"):
        run(make_cfg("mode=generate", f"ckpt_path={cut}"))


def test_resuming_with_the_other_architecture_is_refused(tiny_ckpt, make_cfg) -> None:
    with pytest.raises(
        ValueError,
        match=r"holds a decoder \(model=gpt\) but the model "
        r"config builds an encoder \(model=bert\)",
    ):
        run(make_cfg("model=bert", *TINY[1:5], f"ckpt_path={tiny_ckpt}"))
    with pytest.raises(ValueError, match=r"model.max_seq_len=64 \(checkpoint: 32\)"):
        run(make_cfg("model.max_seq_len=64", f"ckpt_path={tiny_ckpt}"))


def test_resuming_with_the_other_optimiser_is_refused(tiny_ckpt, tmp_path, make_cfg) -> None:
    # tiny_ckpt is a default GPT run: Muon.
    refused = r"trained with other settings: optim=adamw \(checkpoint: muon, whose optimiser"
    with pytest.raises(ValueError, match=refused):
        run(make_cfg("optim=adamw", f"ckpt_path={tiny_ckpt}"))
    # The earlier default (AdamW, learned positions) against it: both named in one line.
    both = r"model.position=learned \(checkpoint: rope\), optim=adamw \(checkpoint: muon"
    with pytest.raises(ValueError, match=both):
        run(make_cfg("optim=adamw", "model.position=learned", f"ckpt_path={tiny_ckpt}"))
    # A checkpoint saved before optim had a kind was an AdamW run.
    old = tmp_path / "old.ckpt"
    checkpoint = torch.load(tiny_ckpt, weights_only=True)
    del checkpoint["hyper_parameters"]["optim_config"]["kind"]
    torch.save(checkpoint, old)
    refused = r"trained with other settings: optim=muon \(checkpoint: adamw, whose optimiser"
    with pytest.raises(ValueError, match=refused):
        run(make_cfg(f"ckpt_path={old}"))


def test_tokenizer_that_does_not_fit_the_model(tiny_ckpt, tmp_path, make_cfg) -> None:
    from tokenizers import Tokenizer, models

    checkpoint = torch.load(tiny_ckpt, weights_only=True)
    other = Tokenizer(models.WordLevel({"[UNK]": 0, "a": 1, "b": 2}, unk_token="[UNK]"))
    checkpoint["hyper_parameters"]["tokenizer_json"] = other.to_str()
    bad = tmp_path / "mismatch.ckpt"
    torch.save(checkpoint, bad)
    with pytest.raises(
        ValueError,
        match=r"tokenizer has 3 tokens but the model's vocab_size "
        r"is 300",
    ):
        run(make_cfg("mode=generate", f"ckpt_path={bad}"))


@pytest.mark.parametrize("mode", ["eval", "generate"])
def test_longer_context_than_the_position_table(tiny_ckpt, tmp_path, mode) -> None:
    # model.* on the command line of eval/generate would be ignored (the checkpoint decides):
    # a larger max_seq_len is refused, naming the table size.
    proc = train_py(
        *TINY,
        f"mode={mode}",
        f"ckpt_path={tiny_ckpt}",
        "model.max_seq_len=64",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 1 and "Traceback" not in proc.stderr
    assert "model.max_seq_len=64 is larger than the position table" in proc.stderr
    assert "(32 positions)" in proc.stderr


def test_export_safetensors_reloads_to_the_same_logits(tiny_ckpt, make_cfg, tmp_path) -> None:
    from training.checkpoint import load_checkpoint, load_safetensors

    ckpt = Path(shutil.copy(tiny_ckpt, tmp_path))  # export writes beside the checkpoint
    out = Path(run(make_cfg("mode=export", f"ckpt_path={ckpt}"))["safetensors"])
    assert out == ckpt.with_suffix(".safetensors") and out.is_file()
    exported, tokenizer_json = load_safetensors(out)
    original = load_checkpoint(ckpt)
    assert tokenizer_json == original.tokenizer_json
    ids = torch.randint(0, original.config.vocab_size, (2, 16))
    with torch.inference_mode():
        assert torch.equal(exported(ids), original.model(ids))


# --------------------------------------------------------------------------- 8. generation input


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


# --------------------------------------------------------------------------- 6. sweeps


def test_rerun_sweep_skips_finished_and_resumes_unfinished_jobs(tmp_path: Path) -> None:
    import csv

    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
    ]
    # First pass: job 0 completes, job 1 is stopped by SIGTERM at step 7 (a pre-emption).
    wrapper = (
        "from tests.faults import SignalInSweepJob, main_with\nmain_with(SignalInSweepJob(1, 7))\n"
    )
    first = train_py(*args, cwd=tmp_path, wrapper=wrapper)
    assert first.returncode == 143, first.stderr[-3000:]
    assert "Traceback" not in first.stderr
    assert f"hydra.sweep.dir={sweep}" in first.stdout  # the way back, printed at the start
    done = json.loads((sweep / "0" / "metrics.json").read_text())
    assert done["status"] == "completed"
    assert json.loads((sweep / "1" / "metrics.json").read_text())["status"] == "interrupted"
    stamp = (sweep / "0" / "metrics.json").stat().st_mtime_ns

    second = train_py(*args, cwd=tmp_path)
    assert second.returncode == 0, second.stderr[-3000:]
    assert "already completed, skipping" in second.stdout
    assert "resuming the unfinished job" in second.stdout
    assert (sweep / "0" / "metrics.json").stat().st_mtime_ns == stamp  # untouched
    resumed = json.loads((sweep / "1" / "metrics.json").read_text())
    assert resumed["status"] == "completed" and resumed["step"] == 10
    with open(sweep / "runs.csv") as f:
        rows = {r["run"]: r for r in csv.DictReader(f)}
    assert [rows[k]["status"] for k in ("0", "1")] == ["completed", "completed"]
    assert float(rows["0"]["best_val_loss"]) == pytest.approx(done["best_val_loss"], rel=1e-3)


@pytest.mark.slow
def test_rerun_sweep_retrains_a_deleted_job_and_resumes_one_without_metrics(
    tmp_path: Path,
) -> None:
    """The README's two ways back into a finished sweep: a job whose directory was deleted
    trains again from scratch; a job whose metrics.json alone is gone (killed hard after its
    last checkpoint) resumes from last.ckpt."""
    sweep = tmp_path / "sweep"
    args = [
        "-m",
        *TINY,
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
    ]
    assert train_py(*args, cwd=tmp_path).returncode == 0
    first = {job: json.loads((sweep / job / "metrics.json").read_text()) for job in ("0", "1")}
    shutil.rmtree(sweep / "0")
    (sweep / "1" / "metrics.json").unlink()
    again = train_py(*args, cwd=tmp_path)
    assert again.returncode == 0, again.stderr[-3000:]
    assert "already completed, skipping" not in again.stdout
    assert again.stdout.count("resuming the unfinished job") == 1
    assert f"resuming the unfinished job in {sweep / '1'}" in again.stdout
    retrained = json.loads((sweep / "0" / "metrics.json").read_text())
    # Trained from step 0 again with the same seed: the same losses as the first time.
    assert retrained["status"] == "completed" and retrained["step"] == 6
    assert retrained["best_val_loss"] == pytest.approx(first["0"]["best_val_loss"], abs=1e-6)
    assert retrained["train_seconds"] > 0
    # Resumed at its last step: nothing left to train, validated again.
    resumed = json.loads((sweep / "1" / "metrics.json").read_text())
    assert resumed["status"] == "completed" and resumed["step"] == 6
    assert resumed["val_loss"] == pytest.approx(first["1"]["val_loss"], abs=1e-6)


# --------------------------------------------------------------------------- 7. distributed

DDP = ["trainer=cpu_ddp"]


def test_cpu_ddp_trains_once_logs_once_and_checkpoints_once(tmp_path: Path) -> None:
    counts = tmp_path / "tokenizer_trainings.txt"
    rows = tmp_path / "rows"
    wrapper = (
        "from tests.faults import RecordBatches, count_tokenizer_training, main_with\n"
        f"count_tokenizer_training({str(counts)!r})\nmain_with(RecordBatches({str(rows)!r}))\n"
    )
    out = tmp_path / "run"
    proc = train_py(
        *TINY,
        *DDP,
        "logger=csv",
        "trainer.max_steps=10",
        "trainer.val_check_interval=5",
        f"hydra.run.dir={out}",
        cwd=tmp_path,
        wrapper=wrapper,
        TINYLM_CACHE=str(tmp_path / "cache"),
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert "GLOBAL_RANK: 1" in proc.stderr  # two processes really ran
    assert proc.stdout.count("tinylm: decoder with") == 1
    assert proc.stdout.count("=== tinylm results ===") == 1
    assert counts.read_text().split() == ["0"]  # the tokenizer was trained once, by rank 0
    # Each rank trained on its own blocks, read from the one memory-mapped token store.
    ranks = [
        [
            tuple(b)
            for line in Path(f"{rows}.{r}").read_text().splitlines()
            for b in json.loads(line)["blocks"]
        ]
        for r in (0, 1)
    ]
    assert len(ranks[0]) == len(ranks[1]) == 10 * 8  # 10 steps of data.batch_size=8 blocks
    assert not set(ranks[0]) & set(ranks[1])
    assert len(list((tmp_path / "cache" / "tokens").iterdir())) == 1
    assert sorted(p.name for p in (out / "checkpoints").iterdir()) == ["best.ckpt", "last.ckpt"]
    assert not list(tmp_path.rglob("version_*"))  # one csv log, no per-rank directories
    metrics = json.loads((out / "metrics.json").read_text())
    assert metrics["status"] == "completed" and metrics["step"] == 10
    with open(out / "csv" / "metrics.csv") as f:
        steps = [line.split(",") for line in f]
    assert len(steps) > 2


@pytest.mark.slow
def test_cpu_ddp_under_multirun_uses_spawn(tmp_path: Path) -> None:
    import csv

    sweep = tmp_path / "sweep"
    proc = train_py(
        "-m",
        *TINY,
        *DDP,
        "trainer.max_steps=6",
        "trainer.val_check_interval=3",
        "model.dropout=0.0,0.1",
        f"hydra.sweep.dir={sweep}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    assert proc.stdout.count("Launching 2 jobs") == 1  # the sweep ran once, not per rank
    with open(sweep / "runs.csv") as f:
        assert [r["status"] for r in csv.DictReader(f)] == ["completed", "completed"]
    assert len(list(sweep.glob("*/checkpoints/best.ckpt"))) == 2


@pytest.mark.slow
def test_cpu_ddp_interrupted_run_resumes_to_the_same_loss_and_ranks_stop_together(
    tmp_path: Path,
) -> None:
    def train(name: str, *extra: str, signal_at: int | None = None) -> Path:
        steps = tmp_path / f"{name}-final-steps.txt"
        injectors = f"RecordFinalStep({str(steps)!r})"
        if signal_at is not None:
            injectors += f", SignalAtStep({signal_at})"
        wrapper = (
            "from tests.faults import RecordFinalStep, SignalAtStep, main_with\n"
            f"main_with({injectors})\n"
        )
        proc = train_py(
            *TINY,
            *DDP,
            *RESUME,
            *extra,
            f"hydra.run.dir={tmp_path / name}",
            cwd=tmp_path,
            wrapper=wrapper,
        )
        expected_code = 0 if signal_at is None else 128 + signal.SIGTERM
        assert proc.returncode == expected_code, proc.stderr[-3000:]
        lines = [line for line in proc.stderr.splitlines() if line.startswith("tinylm:")]
        assert len(lines) == (signal_at is not None), lines  # one line, from rank 0
        return steps

    full = train("full")
    cut = train("cut", signal_at=11)
    # Each rank wrote the step it stopped at: the same one, the step of the checkpoint. (The
    # ranks agree at the end of each step whether to stop: a signal sent after that, at the
    # end of step 11, stops them at the end of step 12.)
    stopped = dict(line.split() for line in cut.read_text().splitlines())
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    step = torch.load(last, weights_only=True)["global_step"]
    assert stopped == {"0": str(step), "1": str(step)} and 11 <= step < 24
    status = json.loads((tmp_path / "cut" / "metrics.json").read_text())
    assert status["status"] == "interrupted" and status["step"] == step
    resumed = train("resumed", f"ckpt_path={last}")
    for finished in (full, resumed):
        assert dict(line.split() for line in finished.read_text().splitlines()) == {
            "0": "24",
            "1": "24",
        }

    final = {
        name: json.loads((tmp_path / name / "metrics.json").read_text())
        for name in ("full", "resumed")
    }
    assert final["resumed"]["step"] == final["full"]["step"] == 24
    assert final["resumed"]["val_loss"] == pytest.approx(final["full"]["val_loss"], abs=1e-6)
    assert final["resumed"]["best_val_loss"] == pytest.approx(
        final["full"]["best_val_loss"], abs=1e-6
    )
