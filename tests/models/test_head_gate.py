"""The head gate (models/attention.py ``head_gate``, ``Encoder/Decoder.forward(head_mask=)``).

A gate of ones is the identity, bit for bit, on the SDPA path and the plain path; a gate g on
head h equals scaling head h's slice of the concatenated heads by g before ``out_proj``,
computed apart here from the slice a hook reads off ``out_proj``'s input.
"""

from __future__ import annotations

import pytest
import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import MultiHeadAttention
from tests.tiny_models import tiny_model

PATHS = [pytest.param(False, id="sdpa"), pytest.param(True, id="plain")]
KV_HEADS = [pytest.param(4, id="mha"), pytest.param(2, id="gqa"), pytest.param(1, id="mqa")]


def _output(module: MultiHeadAttention, x: Tensor, plain: bool, **kwargs) -> Tensor:
    out = module(x, causal=True, need_weights=plain, **kwargs)
    return out[0] if plain else out


def _scaled_slice(module: MultiHeadAttention, x: Tensor, plain: bool, gate: Tensor) -> Tensor:
    """The ungated forward's heads read off ``out_proj``'s input, head h's slice scaled by
    gate[h], projected by ``out_proj``'s weights."""
    seen: list[Tensor] = []
    handle = module.out_proj.register_forward_pre_hook(lambda _, args: seen.append(args[0]))
    _output(module, x, plain)
    handle.remove()
    heads = seen[0].unflatten(-1, (module.num_heads, module.head_dim))  # (B, T, H, D)
    scaled = (heads * gate[:, None]).flatten(-2)  # (B, T, H * D)
    return F.linear(scaled, module.out_proj.weight, module.out_proj.bias)


@pytest.mark.parametrize("plain", PATHS)
@pytest.mark.parametrize("kv_heads", KV_HEADS)
def test_a_gate_of_ones_is_bit_identical(plain: bool, kv_heads: int) -> None:
    torch.manual_seed(0)
    module = MultiHeadAttention(32, 4, num_kv_heads=kv_heads).eval()
    x = torch.randn(2, 7, 32)  # (B, T, C)
    expected = _output(module, x, plain)
    assert torch.equal(_output(module, x, plain, head_gate=torch.ones(4)), expected)


@pytest.mark.parametrize("plain", PATHS)
@pytest.mark.parametrize("kv_heads", KV_HEADS)
@pytest.mark.parametrize("head", [0, 1, 3])
def test_zeroing_a_head_removes_its_slice_before_out_proj(
    plain: bool, kv_heads: int, head: int
) -> None:
    """Under GQA the gate is per query head: head 0 and 1 share keys and values, and zeroing
    one leaves the other whole."""
    torch.manual_seed(1)
    module = MultiHeadAttention(32, 4, num_kv_heads=kv_heads).eval()
    x = torch.randn(2, 7, 32)  # (B, T, C)
    gate = torch.ones(4)
    gate[head] = 0.0
    got = _output(module, x, plain, head_gate=gate)
    torch.testing.assert_close(got, _scaled_slice(module, x, plain, gate), atol=1e-6, rtol=0)
    assert not torch.allclose(got, _output(module, x, plain), atol=1e-4)


@pytest.mark.parametrize("plain", PATHS)
def test_a_fractional_gate_scales_each_slice_and_carries_a_gradient(plain: bool) -> None:
    torch.manual_seed(2)
    module = MultiHeadAttention(32, 4, num_kv_heads=2).eval()
    x = torch.randn(2, 5, 32)  # (B, T, C)
    gate = torch.tensor([0.5, 1.0, 0.0, 2.0], requires_grad=True)
    got = _output(module, x, plain, head_gate=gate)
    torch.testing.assert_close(
        got, _scaled_slice(module, x, plain, gate.detach()), atol=1e-6, rtol=0
    )
    got.sum().backward()
    assert gate.grad is not None and gate.grad.shape == (4,) and bool(gate.grad.ne(0).all())


@pytest.mark.parametrize("arch", ["decoder", "encoder"])
def test_the_models_pass_each_layer_its_row_of_the_head_mask(arch: str) -> None:
    torch.manual_seed(3)
    model = tiny_model(arch, num_kv_heads=2)
    ids = torch.randint(0, 37, (2, 9))  # (B, T)
    mask = torch.ones(2, 9, dtype=torch.long)
    mask[1, 6:] = 0  # padding: the encoder's masked path
    assert torch.equal(model(ids, mask, head_mask=torch.ones(2, 4)), model(ids, mask))

    layer, head = 1, 2
    gate = torch.ones(4)
    gate[head] = 0.0
    module = model.blocks[layer].attn

    def zero_slice(_: nn.Module, args: tuple[Tensor, ...]) -> tuple[Tensor, ...]:
        heads = args[0].unflatten(-1, (module.num_heads, module.head_dim))  # (B, T, H, D)
        return ((heads * gate[:, None]).flatten(-2),)

    handle = module.out_proj.register_forward_pre_hook(zero_slice)
    expected = model(ids, mask)
    handle.remove()
    head_mask = torch.ones(2, 4)
    head_mask[layer, head] = 0.0
    torch.testing.assert_close(model(ids, mask, head_mask=head_mask), expected, atol=1e-6, rtol=0)


@pytest.mark.parametrize(
    "shape, dtype", [((3, 4), torch.float32), ((2, 3), torch.float32), ((2, 4), torch.bool)]
)
def test_a_head_mask_of_the_wrong_shape_or_dtype_is_refused(
    shape: tuple[int, int], dtype: torch.dtype
) -> None:
    model = tiny_model()
    with pytest.raises(ValueError, match=r"\[num_layers, num_heads\] = \[2, 4\]"):
        model(torch.zeros(1, 3, dtype=torch.long), head_mask=torch.ones(shape, dtype=dtype))
    with pytest.raises(ValueError, match=r"\[num_heads\] = \[4\]"):
        model.blocks[0].attn(torch.zeros(1, 3, 32), head_gate=torch.ones(3))
