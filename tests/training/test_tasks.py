"""Tests for training/task.py and training/optim.py: the loss, the optimisers and the
learning-rate schedule."""

from __future__ import annotations

import io
import math

import pytest
import torch

from data.config import DataConfig
from models.transformer import build_model
from tests.tiny_models import tiny_config
from tests.tiny_tasks import MUON, OPTIM, tiny_task
from training.optim import BatchedMuon, MuonWithAdamW, build_optimizer
from training.task import MaskedLMTask, warmup_cosine


def test_mlm_batch_without_masked_tokens_has_zero_loss_not_nan() -> None:
    cfg = tiny_config(arch="encoder")
    task = MaskedLMTask(
        model_config=cfg,
        optim_config=OPTIM,
        tokenizer_json="{}",
        data_config=DataConfig(),
        chars_per_token={},
    )
    ids = torch.randint(5, cfg.vocab_size, (2, 8))
    labels = torch.full_like(ids, -100)
    loss, _ = task._loss({"input_ids": ids, "labels": labels})
    assert loss.item() == 0.0
    labels[0, 3] = ids[0, 3]  # one target: the mean over targets is that token's loss
    loss, logits = task._loss({"input_ids": ids, "labels": labels})
    expected = torch.nn.functional.cross_entropy(logits[0, 3:4], ids[0, 3:4])
    assert loss.item() == pytest.approx(expected.item(), rel=1e-6)


def test_warmup_then_cosine_to_the_floor() -> None:
    def lr(step: int) -> float:
        return warmup_cosine(step, warmup_steps=10, total_steps=110, min_ratio=0.1)

    assert [round(lr(s), 4) for s in (0, 4, 9)] == [round((s + 1) / 11, 4) for s in (0, 4, 9)]
    assert lr(10) == pytest.approx(1.0)
    assert lr(60) == pytest.approx(0.1 + 0.9 * 0.5 * (1 + math.cos(math.pi * 0.5)))
    assert lr(110) == pytest.approx(0.1) and lr(500) == pytest.approx(0.1)
    steps = [lr(s) for s in range(10, 111)]
    assert all(a >= b for a, b in zip(steps, steps[1:], strict=False))  # monotone decay


def _muon_model_and_optimizer(seed: int = 0) -> tuple[torch.nn.Module, MuonWithAdamW]:
    torch.manual_seed(seed)
    model = build_model(tiny_config())
    optimizer = build_optimizer(model, model.blocks, MUON, fused=False)
    assert isinstance(optimizer, MuonWithAdamW)
    return model, optimizer


def _train_step(model: torch.nn.Module, optimizer: torch.optim.Optimizer, seed: int) -> None:
    ids = torch.randint(0, 37, (2, 8), generator=torch.Generator().manual_seed(seed))
    optimizer.zero_grad()
    loss = torch.nn.functional.cross_entropy(model(ids).flatten(0, 1), ids.flatten())
    optimizer.step(loss.backward)


def test_muon_takes_the_block_matrices_and_adamw_the_rest() -> None:
    model, optimizer = _muon_model_and_optimizer()
    block_matrices = {id(p) for p in model.blocks.parameters() if p.dim() == 2}
    muon = {id(p) for g in optimizer.muon.param_groups for p in g["params"]}
    adamw = {id(p) for g in optimizer.adamw.param_groups for p in g["params"]}
    assert muon == block_matrices and not muon & adamw
    assert muon | adamw == {id(p) for p in model.parameters()}
    # The tied token embedding / LM head and the position table go to AdamW, with decay.
    assert id(model.embeddings.token.weight) in adamw
    decayed = {id(p) for p in optimizer.adamw.param_groups[0]["params"]}
    assert decayed == {id(p) for p in model.parameters() if p.dim() == 2} - muon
    # One list of groups covers every parameter: what a gradient clip and the LR scheduler see.
    seen = {id(p) for g in optimizer.param_groups for p in g["params"]}
    assert seen == muon | adamw


def test_one_schedule_scales_both_optimisers() -> None:
    _, optimizer = _muon_model_and_optimizer()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 0.5)
    assert optimizer.muon.param_groups[0]["lr"] == pytest.approx(0.01)
    assert [g["lr"] for g in optimizer.adamw.param_groups] == pytest.approx([1.5e-3, 1.5e-3])
    assert scheduler.get_last_lr()[0] == pytest.approx(0.01)


def test_muon_state_round_trips_and_resumes_exactly() -> None:
    model, optimizer = _muon_model_and_optimizer()
    scheduler = torch.optim.lr_scheduler.LambdaLR(optimizer, lambda step: 1 / (step + 1))
    for step in range(3):
        _train_step(model, optimizer, step)
        scheduler.step()
    saved_model = {k: v.clone() for k, v in model.state_dict().items()}
    buffer = io.BytesIO()  # a weights_only round trip, as a checkpoint goes
    torch.save({"optimizer": optimizer.state_dict(), "scheduler": scheduler.state_dict()}, buffer)
    buffer.seek(0)
    state = torch.load(buffer, weights_only=True)
    assert set(state["optimizer"]) == {"muon", "adamw"}
    assert state["optimizer"]["muon"]["state"]  # Muon's momentum buffers are in it

    restored, restored_optimizer = _muon_model_and_optimizer(seed=1)  # other initial weights
    restored.load_state_dict(saved_model)
    restored_scheduler = torch.optim.lr_scheduler.LambdaLR(
        restored_optimizer, lambda step: 1 / (step + 1)
    )
    restored_optimizer.load_state_dict(state["optimizer"])
    restored_scheduler.load_state_dict(state["scheduler"])
    for step in range(3, 5):
        for m, o, s in (
            (model, optimizer, scheduler),
            (restored, restored_optimizer, restored_scheduler),
        ):
            _train_step(m, o, step)
            s.step()
    # The scheduler still reaches both optimisers' groups after loading replaced them.
    assert restored_optimizer.muon.param_groups[0]["lr"] == pytest.approx(0.02 / 6)
    for a, b in zip(model.parameters(), restored.parameters(), strict=True):
        torch.testing.assert_close(a, b, rtol=0, atol=0)


def test_muon_without_block_matrices_is_one_clear_error() -> None:
    model = build_model(tiny_config())
    model.blocks.requires_grad_(False)
    with pytest.raises(ValueError, match=r"optim=muon found no trainable 2-D weight matrix"):
        build_optimizer(model, model.blocks, MUON, fused=False)


@pytest.mark.parametrize("nesterov", [True, False])
def test_batched_muon_matches_torch_muon(nesterov: bool) -> None:
    """The fast path (same-shaped matrices orthogonalised together) against torch's loop."""
    torch.manual_seed(0)
    # Tall and wide, square, and two shapes that meet once the tall one is transposed.
    shapes = [(24, 8), (8, 8), (32, 8), (8, 32), (24, 8), (8, 8)]
    ours = [torch.nn.Parameter(torch.randn(*shape) * 0.1) for shape in shapes]
    reference = [torch.nn.Parameter(p.detach().clone()) for p in ours]
    kwargs = dict(lr=0.02, momentum=0.9, weight_decay=0.05, nesterov=nesterov)
    optimizers = BatchedMuon(ours, **kwargs), torch.optim.Muon(reference, **kwargs)
    for _ in range(4):
        for mine, theirs in zip(ours, reference, strict=True):
            mine.grad = torch.randn_like(mine)
            theirs.grad = mine.grad.clone()
        for optimizer in optimizers:
            optimizer.step()
    # Both orthogonalise in bfloat16 (relative precision 2^-8 of an update of size ~lr).
    for mine, theirs in zip(ours, reference, strict=True):
        torch.testing.assert_close(mine, theirs, rtol=0, atol=2e-4)
    state = optimizers[0].state_dict()["state"][0]
    assert set(state) == set(optimizers[1].state_dict()["state"][0]) == {"momentum_buffer"}


def test_mup_divides_adams_rate_of_the_hidden_matrices_by_the_width_multiplier() -> None:
    task = tiny_task("encoder", parametrization="mup", hidden_size=64, mup_base_width=16)
    optimizers = task.configure_optimizers()
    optimizer, scheduler = optimizers["optimizer"], optimizers["lr_scheduler"]["scheduler"]
    lrs = {id(p): g["initial_lr"] for g in optimizer.param_groups for p in g["params"]}
    hidden = {id(p) for p in task.model.hidden_matrices()}
    assert {lrs[i] for i in hidden} == {1e-3 / 4}
    # Embeddings, the readout, norms and biases keep the rate: their updates do not add up
    # over a growing dimension.
    assert {lr for i, lr in lrs.items() if i not in hidden} == {1e-3}
    decayed = {id(p) for g in optimizer.param_groups if g["weight_decay"] for p in g["params"]}
    assert decayed == {id(p) for p in task.model.parameters() if p.dim() == 2}
    # The schedule (here its first warmup step, half the rate) scales every group alike.
    assert scheduler.get_last_lr() == pytest.approx([5e-4, 5e-4, 1.25e-4])


def test_under_mup_muon_keeps_its_rate_and_adamw_scales_what_muon_leaves() -> None:
    model = build_model(tiny_config(arch="encoder", hidden_size=64))
    optimizer = build_optimizer(
        model,
        model.blocks,
        MUON,
        fused=False,
        hidden_matrices=model.hidden_matrices(),
        width_multiplier=4.0,
    )
    assert [g["lr"] for g in optimizer.muon.param_groups] == [MUON.muon_lr]
    scaled = [g for g in optimizer.adamw.param_groups if g["lr"] != MUON.lr]
    # The blocks' matrices are Muon's; the MLM head's dense layer is AdamW's hidden matrix.
    assert [g["lr"] for g in scaled] == [pytest.approx(MUON.lr / 4)]
    assert [p for g in scaled for p in g["params"]] == [model.mlm_head.dense.weight]
