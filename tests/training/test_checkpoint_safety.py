"""Checkpoints: written atomically, never with NaN/Inf weights, and refused with a clear error
when untrusted (pickled code), damaged or mismatched with the settings."""

from __future__ import annotations

import os
import shutil
from pathlib import Path

import pytest
import torch

from tests.conftest import TINY, train_py
from tests.faults import NaNAtStep
from train import run

# --------------------------------------------------------------------------- atomic writes


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


# --------------------------------------------------------------------------- NaN / Inf


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


# --------------------------------------------------------------------------- checkpoints


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


@pytest.mark.parametrize("keep", [100, 0.5])  # an empty file: tests/test_damaged_files.py
def test_truncated_checkpoint_gives_a_clear_error(tiny_ckpt, tmp_path, make_cfg, keep) -> None:
    data = tiny_ckpt.read_bytes()
    cut = tmp_path / "cut.ckpt"
    cut.write_bytes(data[: int(len(data) * keep) if isinstance(keep, float) else keep])
    with pytest.raises(ValueError, match=r"cannot read checkpoint .*: it is truncated or damaged"):
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


def test_resuming_with_other_optimiser_settings_names_each_change(
    tiny_ckpt, tmp_path, make_cfg, capsys
) -> None:
    # A rate may change on resuming (it is not refused), but never silently.
    run(make_cfg("trainer.max_steps=17", "optim.lr=1e-3", f"ckpt_path={tiny_ckpt}"))
    said = capsys.readouterr().err
    warning = f"warning: resuming ckpt_path={tiny_ckpt} with optim.lr=0.001 (checkpoint: 0.003)"
    assert warning in said
    assert "muon_momentum_warmup" not in said  # one line per setting that changed, no other
    # A checkpoint from before Muon's momentum warm-up trained without one: today's default
    # of 300 steps would change its momentum from here on. One from before the schedules
    # trained with the cosine, which is no change.
    old = tmp_path / "old.ckpt"
    checkpoint = torch.load(tiny_ckpt, weights_only=True)
    for key in ("muon_momentum_warmup", "schedule", "cooldown_fraction"):
        del checkpoint["hyper_parameters"]["optim_config"][key]
    torch.save(checkpoint, old)
    run(make_cfg("trainer.max_steps=17", f"ckpt_path={old}", output_dir=tmp_path / "old"))
    said = capsys.readouterr().err
    assert "with optim.muon_momentum_warmup=300 (checkpoint: None)" in said
    assert "optim.lr" not in said and "optim.schedule" not in said and "cooldown" not in said
    # The same settings: nothing to say.
    run(make_cfg("trainer.max_steps=17", f"ckpt_path={tiny_ckpt}", output_dir=tmp_path / "same"))
    assert "resuming ckpt_path" not in capsys.readouterr().err


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
    elsewhere = tmp_path / "exported" / "weights.safetensors"  # a directory not made yet
    args = ("mode=export", f"ckpt_path={ckpt}", f"export.path={elsewhere}")
    assert Path(run(make_cfg(*args))["safetensors"]) == elsewhere and elsewhere.is_file()
    exported, tokenizer_json = load_safetensors(out)
    original = load_checkpoint(ckpt)
    assert tokenizer_json == original.tokenizer_json
    ids = torch.randint(0, original.config.vocab_size, (2, 16))
    with torch.inference_mode():
        assert torch.equal(exported(ids), original.model(ids))
