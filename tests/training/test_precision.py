"""Training at every precision the CPU accepts, with every optimiser and model, gradient
clipping included; the trainer=gpu preset's settings on the CPU; torch.compile; and the
guarantees under bfloat16: exact resume, SDPA/plain parity, NaN detection, fp32 HF export."""

from __future__ import annotations

import json
import math
from pathlib import Path

import lightning as L
import pytest
import torch
from hydra import compose, initialize_config_dir
from lightning.pytorch.plugins.precision import MixedPrecision
from omegaconf import DictConfig, OmegaConf
from torch import Tensor
from torch.utils.hooks import RemovableHandle

from analysis.records import RESULTS_FILE
from conf.schema import settings_from_tree
from modes import Interrupted
from tests.conftest import RESUME, ROOT, TINY
from tests.faults import NaNAtStep, SignalAtStep
from tests.models.test_attention import CASES, D_MODEL, B, T, attention_case, attention_output
from train import run
from training import precision as precision_choice

# What conf/schema.py accepts with trainer.accelerator=cpu ("32" is 32-true's other name);
# 16-mixed is refused there, and its fp16 loss scaling is covered by Float16Scaler below.
CPU_PRECISIONS = ["32-true", "bf16-mixed", "bf16-true", "16-true", "64-true"]
MODELS_AND_OPTIMISERS = [("gpt", "muon"), ("gpt", "adamw"), ("bert", "adamw"), ("bert", "muon")]
CLIP = 0.05  # below the tiny models' gradient norms (~0.3-3), so the clip acts
SHORT = ["trainer.max_steps=3", "trainer.val_check_interval=3", "trainer.limit_val_batches=1"]


def _gradient_norm(module: torch.nn.Module) -> float:
    """The gradients' global L2 norm, in float64 (computed apart from Lightning's clip)."""
    grads = [p.grad.double() for p in module.parameters() if p.grad is not None]
    return float(torch.linalg.vector_norm(torch.stack([g.norm() for g in grads])))


class GradientNorms(L.Callback):
    """For each optimiser step, the gradient norm before Lightning clips it
    (``on_before_optimizer_step`` comes first) and the one the step used (the gradients are
    kept until the next batch's backward); the weights before and after training; the dtypes
    of the network's outputs in training (not those of the closing sample, which is float32)."""

    def __init__(self) -> None:
        self.dtypes: set[torch.dtype] = set()
        self.hook: RemovableHandle | None = None
        self.before: list[float] = []
        self.after: list[float] = []
        self.start: dict[str, Tensor] = {}
        self.end: dict[str, Tensor] = {}

    def on_train_start(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.start = {n: p.detach().clone() for n, p in pl_module.named_parameters()}
        self.hook = pl_module.model.register_forward_hook(
            lambda _, __, out: self.dtypes.add(out.dtype)
        )

    def on_before_optimizer_step(self, trainer, pl_module, optimizer) -> None:
        self.before.append(_gradient_norm(pl_module))

    def on_train_batch_end(self, trainer, pl_module, *args: object) -> None:
        self.after.append(_gradient_norm(pl_module))

    def on_train_end(self, trainer: L.Trainer, pl_module: L.LightningModule) -> None:
        self.end = {n: p.detach().clone() for n, p in pl_module.named_parameters()}
        self.hook.remove()


class Float16Scaler(L.Callback):
    """trainer=gpu with trainer.precision=16-mixed, on the CPU: Lightning's fp16 autocast
    with a gradient scaler (on a CPU accelerator Lightning itself would train in bf16-mixed)."""

    def setup(self, trainer: L.Trainer, pl_module: L.LightningModule, stage: str) -> None:
        trainer.strategy.precision_plugin = MixedPrecision("16-mixed", "cpu")


COMPUTE_DTYPES = {
    "32-true": torch.float32,
    "bf16-mixed": torch.bfloat16,
    "bf16-true": torch.bfloat16,
    "16-true": torch.float16,
    "64-true": torch.float64,
    "16-mixed": torch.float16,
}


def _check_clipped_training(norms: GradientNorms, metrics: dict, precision: str) -> None:
    assert norms.dtypes == {COMPUTE_DTYPES[precision]}
    assert math.isfinite(metrics["val_loss"])
    assert len(norms.before) == len(norms.after) == 3
    half_gradients = precision in ("bf16-true", "16-true")
    # Gradients held in bf16/fp16 are clipped in that precision (2^-8 / 2^-11 relative).
    rel = 2e-2 if half_gradients else 1e-4
    assert all(math.isfinite(n) for n in norms.before), norms.before
    assert max(norms.before) > CLIP  # the clip had something to do
    for before, after in zip(norms.before, norms.after, strict=True):
        assert after == pytest.approx(min(before, CLIP), rel=rel)
    changed = [n for n, p in norms.start.items() if not torch.equal(p, norms.end[n])]
    matrices = [n for n, p in norms.start.items() if p.dim() == 2]
    assert set(matrices) <= set(changed)


@pytest.mark.parametrize("precision", [*CPU_PRECISIONS, "16-mixed"])
@pytest.mark.parametrize(("model", "optim"), MODELS_AND_OPTIMISERS)
def test_every_precision_trains_each_model_and_optimiser_with_the_clip(
    make_cfg, model: str, optim: str, precision: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A precision typed on the command line is kept on any CPU (training/precision.py); a
    # composed config records no command line, so the CPU's own bfloat16 must not decide.
    monkeypatch.setattr("training.precision.native_bf16_cpu", lambda: True)
    norms = GradientNorms()
    callbacks = [norms]
    if precision == "16-mixed":
        callbacks.append(Float16Scaler())
    settings = [f"trainer.precision={precision}"] if precision != "16-mixed" else []
    metrics = run(
        make_cfg(
            f"model={model}",
            *TINY[1:5],  # model=... resets the model keys: the tiny ones again
            f"optim={optim}",
            *settings,
            *SHORT,
            f"trainer.gradient_clip_val={CLIP}",
            "max_new_tokens=2",
        ),
        callbacks,
    )
    _check_clipped_training(norms, metrics, precision)


def test_16_mixed_on_the_cpu_is_one_line_naming_bf16_mixed(make_cfg) -> None:
    with pytest.raises(ValueError, match=r"16-mixed .*needs a GPU; on the CPU use .*bf16-mixed$"):
        run(make_cfg("trainer.precision=16-mixed"))


def test_16_mixed_on_a_cpu_found_by_accelerator_auto_is_refused_before_any_work(
    make_cfg, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    # Lightning would train in bf16-mixed instead, and the record would say 16-mixed.
    monkeypatch.setattr(torch.cuda, "is_available", lambda: False)
    cfg = make_cfg("trainer.precision=16-mixed", "trainer.accelerator=auto", *SHORT)
    with pytest.raises(ValueError) as raised:
        run(cfg)
    assert str(raised.value) == (
        "trainer.precision=16-mixed (float16 with a gradient scaler) needs a GPU, and "
        "trainer.accelerator=auto found none; on the CPU use trainer.precision=bf16-mixed or "
        "32-true, or give trainer.accelerator=gpu on a machine with one"
    )
    assert not (tmp_path / "run").exists()  # no tokenizer, no checkpoint, no record


def _preset(*overrides: str) -> DictConfig:
    """The config tree as presets make it, without TINY (whose 32-true would hide theirs)."""
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        return compose(config_name="config", overrides=list(overrides))


def _gpu_preset_on_the_cpu(*overrides: str) -> list[str]:
    """trainer=gpu's settings but the device (TINY's shape and length), checked to be the
    preset's own: bf16-mixed, torch.compile, clipping at 1.0."""
    preset = ["trainer=gpu", "trainer.accelerator=cpu"]
    trainer = _preset(*preset).trainer
    assert (trainer.precision, trainer.gradient_clip_val) == ("bf16-mixed", 1.0)
    assert trainer.compile is True
    return [*preset, f"trainer.precision={trainer.precision}", *overrides]


def test_gpu_preset_trains_on_the_cpu(make_cfg) -> None:
    norms = GradientNorms()
    args = _gpu_preset_on_the_cpu("trainer.compile=false", *SHORT, "max_new_tokens=2")
    metrics = run(make_cfg(*args), [norms])
    assert math.isfinite(metrics["val_loss"])
    assert norms.after == pytest.approx([min(n, 1.0) for n in norms.before], rel=1e-4)


# --------------------------------------------------------------------------- resume


@pytest.mark.parametrize("precision", ["bf16-mixed", "bf16-true"])
def test_bf16_run_resumes_exactly(make_cfg, tmp_path: Path, precision: str) -> None:
    settings = [*RESUME, "optim=adamw", f"trainer.precision={precision}"]
    full = run(make_cfg(*settings, output_dir=tmp_path / "full"))
    with pytest.raises(Interrupted):
        run(make_cfg(*settings, output_dir=tmp_path / "cut"), [SignalAtStep(11)])
    last = tmp_path / "cut" / "checkpoints" / "last.ckpt"
    saved = torch.load(last, weights_only=True)
    weights = {v.dtype for k, v in saved["state_dict"].items() if k.startswith("model.")}
    assert weights == {torch.bfloat16 if precision == "bf16-true" else torch.float32}
    resumed = run(make_cfg(*settings, f"ckpt_path={last}", output_dir=tmp_path / "resumed"))
    assert resumed["step"] == full["step"] == 24
    assert resumed["val_loss"] == pytest.approx(full["val_loss"], abs=1e-6)
    assert resumed["best_val_loss"] == pytest.approx(full["best_val_loss"], abs=1e-6)


def test_nan_under_bf16_mixed_stops_with_the_step(make_cfg) -> None:
    with pytest.raises(FloatingPointError, match=r"at step 4\."):
        run(
            make_cfg("trainer.precision=bf16-mixed", "trainer.max_steps=8", *SHORT[1:]),
            [NaNAtStep(4)],
        )


# --------------------------------------------------------------------------- SDPA under bf16

# bfloat16 keeps 8 significant bits (a rounding step of 2^-8, relative) and the two paths
# round differently: every output and gradient is held to four such steps of its largest
# fp32 value, or of 1 where that is smaller (a key bias's gradient is 0 in exact arithmetic
# and rounding noise in bf16). Measured: at most 2.1 steps, in either path.
BF16_STEPS = 4


def _assert_close_in_bf16(actual: Tensor, expected: Tensor, scale: Tensor) -> None:
    atol = BF16_STEPS * 2**-8 * max(float(scale.abs().max()), 1.0)
    torch.testing.assert_close(actual, expected, atol=atol, rtol=0)


@pytest.mark.parametrize("name", CASES)
def test_sdpa_matches_plain_under_bf16_autocast(name: str) -> None:
    module, kwargs, inputs = attention_case(name)
    module.eval()
    grad_out = torch.randn(B, T, D_MODEL)
    results = []
    for autocast, need_weights in ((False, True), (True, False), (True, True)):
        module.zero_grad()
        for t in inputs:
            t.grad = None
        with torch.autocast("cpu", dtype=torch.bfloat16, enabled=autocast):
            out = attention_output(module, inputs[0], kwargs, need_weights)
        assert out.dtype == (torch.bfloat16 if autocast else torch.float32)
        (out.float() * grad_out).sum().backward()
        results.append([out.detach().float(), *(t.grad.clone() for t in inputs)])
        results[-1] += [p.grad.clone() for p in module.parameters()]
    reference, sdpa, plain = results
    assert len(reference) == len(sdpa) == len(plain) > len(inputs) + 1
    for ref, by_sdpa, by_plain in zip(reference, sdpa, plain, strict=True):
        _assert_close_in_bf16(by_sdpa, ref, ref)
        _assert_close_in_bf16(by_plain, ref, ref)
        _assert_close_in_bf16(by_sdpa, by_plain, ref)


# --------------------------------------------------------------------------- export


def test_hf_export_of_a_bf16_true_run_is_float32(make_cfg, tmp_path: Path) -> None:
    pytest.importorskip("transformers")
    from safetensors.torch import load_file

    run(make_cfg("trainer.precision=bf16-true", *SHORT, "max_new_tokens=2"))
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    trained = torch.load(ckpt, weights_only=True)["state_dict"]
    embedding = trained["model.embeddings.token.weight"]
    assert embedding.dtype == torch.bfloat16
    result = run(make_cfg("mode=export", f"ckpt_path={ckpt}", "export.format=hf"))
    folder = Path(result["hf"])
    config = json.loads((folder / "config.json").read_text())
    assert config.get("dtype", config.get("torch_dtype")) == "float32"  # (older transformers)
    exported = load_file(folder / "model.safetensors")
    assert {t.dtype for t in exported.values()} == {torch.float32}
    # The bf16 weights themselves, widened: the embedding is among the exported tensors.
    assert any(torch.equal(t, embedding.float()) for t in exported.values())


# --------------------------------------------------------------------------- torch.compile


def _compiled_frames() -> int:
    """Frames dynamo has compiled in this process so far."""
    from torch._dynamo.utils import counters

    return counters["frames"]["ok"]


@pytest.mark.slow  # inductor builds a training and a validation graph: 30-80 s on 2 cores
def test_gpu_preset_compiles_and_its_checkpoints_cross_eager_and_compiled(
    make_cfg, tmp_path: Path
) -> None:
    """An eager run resumes compiled (trainer=gpu's settings but the device), and that run's
    checkpoint holds the network's own names, loads into an eager network and resumes eager."""
    from training.checkpoint import load_checkpoint

    common = [*SHORT[1:], "trainer.val_check_interval=2", "max_new_tokens=2"]
    eager = tmp_path / "eager" / "checkpoints" / "last.ckpt"
    run(make_cfg(*common, "trainer.max_steps=2", output_dir=eager.parents[1]))
    frames = _compiled_frames()
    compiled = tmp_path / "compiled" / "checkpoints" / "last.ckpt"
    args = _gpu_preset_on_the_cpu(*common, "trainer.max_steps=4", f"ckpt_path={eager}")
    metrics = run(make_cfg(*args, output_dir=compiled.parents[1]))
    assert _compiled_frames() > frames  # it did compile
    assert metrics["step"] == 4 and math.isfinite(metrics["val_loss"])

    keys = {k for k in torch.load(compiled, weights_only=True)["state_dict"]}
    assert keys == set(torch.load(eager, weights_only=True)["state_dict"])
    assert not any("_orig_mod" in k for k in keys)
    loaded = load_checkpoint(compiled)  # a strict load into an eager network
    assert loaded.global_step == 4
    assert not torch.equal(
        loaded.model.embeddings.token.weight, load_checkpoint(eager).model.embeddings.token.weight
    )
    frames = _compiled_frames()
    resumed = run(
        make_cfg(*common, "trainer.max_steps=6", f"ckpt_path={compiled}", output_dir=tmp_path / "r")
    )
    assert resumed["step"] == 6 and _compiled_frames() == frames


def test_compile_without_a_cpp_compiler_says_so_and_trains_eager(
    make_cfg, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture
) -> None:
    import torch._inductor.config as inductor_config

    # config.patch, not monkeypatch: undoing a monkeypatch of the config proxy deletes the key
    monkeypatch.delenv("CXX", raising=False)
    frames = _compiled_frames()
    with inductor_config.patch({"cpp.cxx": (None, "/nonexistent/g++")}):
        metrics = run(make_cfg("trainer.compile=true", *SHORT, "max_new_tokens=2"))
    assert metrics["step"] == 3 and math.isfinite(metrics["val_loss"])
    assert _compiled_frames() == frames
    assert metrics["provenance"]["compile"] == "off"  # what ran
    notes = [line for line in capsys.readouterr().err.splitlines() if "tinylm:" in line]
    assert notes == [
        "tinylm: warning: trainer.compile=true needs a C++ compiler for torch.compile's "
        "inductor backend and found none (g++, or the one $CXX names); training without "
        "compiling"
    ]


def test_compile_falls_back_as_the_job_starts_only_in_the_mode_that_compiles(monkeypatch) -> None:
    from dataclasses import replace

    from training import compile as compiling

    asked = _settings("trainer.compile=true")
    monkeypatch.setattr(compiling, "inductor_cpp_compiler", lambda: "g++")
    assert compiling.with_compile(asked) == (asked, None)
    monkeypatch.setattr(compiling, "inductor_cpp_compiler", lambda: None)
    settings, note = compiling.with_compile(asked)
    assert settings.trainer.compile is False and note.endswith("training without compiling")
    evaluating = replace(asked, job=replace(asked.job, mode="eval", ckpt_path="x.ckpt"))
    assert compiling.with_compile(evaluating) == (evaluating, None)


# --------------------------------------------------------------------------- the default


def test_trainer_cpu_trains_in_bf16_autocast_and_the_shakespeare_presets_in_float32() -> None:
    """What bench.train_step measured (docs/benchmarks.md): bf16-mixed wins at the default
    GPT's shape and loses at shakespeare_char's."""
    assert _preset().trainer.precision == "bf16-mixed"
    for experiment in ("shakespeare_char", "shakespeare_char_fast"):
        assert _preset(f"experiment={experiment}").trainer.precision == "32-true"
    assert _preset("trainer=cpu_ddp").trainer.precision == "32-true"


def _settings(*overrides: str, typed: tuple[str, ...] = ()):
    """Settings from the presets plus ``overrides``; ``typed`` are the ones given on the
    command line (Hydra's job overrides)."""
    config = _preset(*overrides, *typed, "output_dir=run")  # the default reads Hydra's run dir
    tree = OmegaConf.to_container(config, resolve=True)
    return settings_from_tree(tree, overrides=dict(o.split("=", 1) for o in typed), sweep_dir=None)


@pytest.mark.parametrize("native", [True, False])
def test_a_preset_bf16_falls_back_to_float32_only_on_a_cpu_without_native_bf16(
    monkeypatch, native: bool
) -> None:
    monkeypatch.setattr(precision_choice, "native_bf16_cpu", lambda: native)
    settings, note = precision_choice.with_native_precision(_settings())
    assert settings.trainer.precision == ("bf16-mixed" if native else "32-true")
    assert (note is None) == native
    if note:
        assert "no native bfloat16" in note and "trainer.precision=bf16-mixed" in note
    # What the user typed is kept, and a GPU run is not the CPU's business.
    for kept in (
        _settings(typed=("trainer.precision=bf16-mixed",)),
        _settings("trainer=gpu", typed=("trainer.accelerator=gpu",)),
    ):
        assert precision_choice.with_native_precision(kept) == (kept, None)


def test_on_a_gpu_without_flash_attention_says_so_once_and_the_record_names_the_kernel(
    monkeypatch, capsys
) -> None:
    from common import provenance as stamps

    monkeypatch.setattr(torch.cuda, "is_available", lambda: True)
    monkeypatch.setattr(torch.cuda, "get_device_name", lambda index: "Test GPU")
    monkeypatch.setattr(stamps, "flash_runs", lambda dtype: False)
    stamps.attention_kernel.cache_clear()  # its answers for this machine, not the test's GPU
    try:
        settings = precision_choice.native_precision(_settings("trainer=gpu"))
        recorded = stamps.provenance(settings.trainer.precision, settings.trainer.accelerator)
    finally:
        stamps.attention_kernel.cache_clear()
    assert capsys.readouterr().err.splitlines() == [
        "tinylm: warning: GPU: Test GPU (or this torch build) has no flash kernel for SDPA in "
        "bfloat16: attention runs in SDPA's memory-efficient or math kernel, slower"
    ]
    assert (recorded["accelerator"], recorded["precision"]) == ("gpu", "bf16-mixed")
    assert recorded["attention"] == "sdpa: no flash (this GPU or torch build)"


def test_the_fallback_trains_and_evaluates_in_float32_and_the_record_says_so(
    monkeypatch, make_cfg, tmp_path: Path, capsys
) -> None:
    monkeypatch.setattr(precision_choice, "native_bf16_cpu", lambda: False)
    seen = []

    class Precision(L.Callback):
        def on_fit_start(self, trainer, pl_module) -> None:
            seen.append(trainer.precision)

        on_validation_start = on_fit_start

    run(make_cfg("trainer.precision=bf16-mixed", *SHORT, "max_new_tokens=2"), [Precision()])
    assert capsys.readouterr().err.count("no native bfloat16") == 1
    ckpt = tmp_path / "run" / "checkpoints" / "last.ckpt"
    run(make_cfg("mode=eval", f"ckpt_path={ckpt}", "trainer.precision=bf16-mixed"), [Precision()])
    assert set(seen) == {"32-true"}
    records = (ckpt.parent / RESULTS_FILE).read_text().splitlines()
    assert [json.loads(r)["precision"] for r in records] == ["32-true"]
    monkeypatch.setattr(precision_choice, "native_bf16_cpu", lambda: True)
    run(make_cfg("mode=eval", f"ckpt_path={ckpt}", "trainer.precision=bf16-mixed"), [Precision()])
    records = (ckpt.parent / RESULTS_FILE).read_text().splitlines()
    # Scored in another precision: another evaluation, kept beside the first.
    assert sorted(json.loads(r)["precision"] for r in records) == ["32-true", "bf16-mixed"]
    assert seen[-1] == "bf16-mixed"


def test_the_rotation_under_bf16_is_the_float32_rotation_rounded_once() -> None:
    """Half-precision activations are rotated in float32 (faster on the CPU than bfloat16
    kernels): the output and its gradient are the float32 ones, rounded to bfloat16 once."""
    from models.attention import RotaryEmbedding, apply_rotary

    torch.manual_seed(0)
    cos, sin = RotaryEmbedding(16, 32)(torch.arange(32)[None])  # (1, T, D/2) each, float32
    cos, sin = cos[:, :, None], sin[:, :, None]  # (1, T, 1, D/2)
    x = torch.randn(2, 32, 3, 16).bfloat16().requires_grad_()  # (B, T, H, D)
    wide = x.detach().float().requires_grad_()
    out, reference = apply_rotary(x, cos, sin), apply_rotary(wide, cos, sin)
    assert out.dtype == torch.bfloat16
    assert torch.equal(out, reference.bfloat16())
    grad = torch.randn(out.shape).bfloat16()
    out.backward(grad)
    reference.backward(grad.float())
    assert x.grad.dtype == torch.bfloat16 and torch.equal(x.grad, wide.grad.bfloat16())
