"""Benchmark models.attention.MultiHeadAttention against a floor, its plain path and torch's MHA.

Usage::

    python -m bench.attention               # full table + peak memory (a few minutes on 2 cores)
    python -m bench.attention --quick       # one shape, few repeats, small memory case
    python -m bench.attention --repeats 50  # more repeats for noisy machines

Candidates, all float32 on CPU, threads left at torch's default:

- ``ours pad``: our module with a [B, T] padding mask (random lengths, one full row).
- ``ours causal``: our module with ``causal=True`` (no padding: SDPA gets ``is_causal=True``).
- ``ours rope``: ``ours causal`` with rotary positions (``model.position=rope``): queries and
  keys rotated by cos/sin tables looked up once outside the timed call, as the models do once
  per forward for all layers.
- ``ours gqa``: ``ours causal`` with ``num_kv_heads = heads / 2`` (grouped-query attention: a
  narrower qkv projection, SDPA with ``enable_gqa``).
- ``ours plain``: ``ours pad`` on the module's plain path (``need_weights=True``, as
  ``mode=attention`` and the head analysis call it): explicit scores, the mask filled with
  finfo.min, softmax, dropout; the [B, H, T, T] scores and probabilities are materialised.
- ``torch MHA``: ``torch.nn.MultiheadAttention(batch_first=True)`` with ``key_padding_mask``.
  It has no dropout on its output projection, so with dropout 0.1 it draws fewer random
  numbers than the others (a third fewer at (8, 128, 256, 4)) and its forward is cheaper.
- ``floor pad`` / ``floor causal``: the least work for the same function: one fused qkv
  Linear, one bare SDPA call (boolean [B, 1, 1, T] padding mask, or ``is_causal=True``), the out
  Linear and the output dropout our module also applies. Ratios are to the floor with the same
  mask type; ``ours rope`` and ``ours gqa`` are compared with the causal floor (of full
  multi-head attention without positions), so the ratio shows what the option costs.

Timing: every case runs with dropout 0 and 0.1 (on CPU SDPA's fused kernel only runs without
dropout; with dropout it falls back to the math kernel). Each candidate is warmed up, then the
candidates are run in a shuffled order within each repeat (interleaved, so drift in a shared
machine's load hits all of them alike) and the median is reported. "fwd" is a training-mode
forward under ``torch.no_grad`` (dropout active); "fwd+bwd" is a forward with autograd plus the
backward of ``out.sum()`` into inputs and parameters. Ratios are the median over repeats of the
ratio of the two candidates' times within the same repeat, which cancels load that drifts
between repeats (2 shared cores are noisy).

Peak memory: forward+backward at (B, T, width, heads) = (4, 1024, 256, 8), dropout 0, for
``ours pad``, ``ours causal`` and ``ours plain``. Each measurement runs in a fresh subprocess (so
no allocator cache or earlier peak carries over): it builds the module and inputs, runs one small
warm-up at T=16 so that lazily loaded kernels and thread pools are already resident, resets the
kernel's peak-RSS mark to the current RSS (Linux: write "5" to /proc/self/clear_refs; importing
torch alone peaks higher than a small pass, so the lifetime peak ``ru_maxrss`` would hide it),
reads VmRSS, runs one forward+backward and reads VmHWM (peak RSS) from /proc/self/status. The
difference is the extra peak memory the pass needed: activations saved for backward,
temporaries and gradients alive at once. Median of 3 processes. Linux only.
"""

from __future__ import annotations

import argparse
import random
import statistics
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import Tensor, nn

from models.attention import MultiHeadAttention, RotaryEmbedding

SHAPES = [(8, 128, 256, 4), (16, 256, 384, 6), (4, 512, 256, 8)]
MEMORY_SHAPE = (4, 1024, 256, 8)
DROPOUTS = [0.0, 0.1]


class Floor(nn.Module):
    """The same projections and one bare SDPA call: what any implementation must pay."""

    def __init__(self, width: int, heads: int, dropout: float) -> None:
        super().__init__()
        self.width, self.heads, self.head_dim = width, heads, width // heads
        self.qkv = nn.Linear(width, 3 * width)
        self.out = nn.Linear(width, width)
        self.dropout = dropout

    def forward(self, x: Tensor, attn_mask: Tensor | None, is_causal: bool) -> Tensor:
        b, t, d = x.shape
        qkv = self.qkv(x).view(b, t, 3, self.heads, self.head_dim)  # (B, T, 3, H, D)
        q, k, v = qkv.permute(2, 0, 3, 1, 4).unbind(0)  # (B, H, T, D) each
        p = self.dropout if self.training else 0.0
        y = F.scaled_dot_product_attention(
            q, k, v, attn_mask=attn_mask, dropout_p=p, is_causal=is_causal
        )  # (B, H, T, D)
        y = y.transpose(1, 2).reshape(b, t, d)  # (B, T, d)
        return F.dropout(self.out(y), p=p, training=self.training)


def padding_mask(batch: int, length: int, generator: torch.Generator) -> Tensor:
    """[B, T] 1 real / 0 pad, lengths uniform in [T/2, T], the first row full."""
    lengths = torch.randint(length // 2, length + 1, (batch,), generator=generator)
    lengths[0] = length
    return (torch.arange(length)[None, :] < lengths[:, None]).long()  # (B, T)


def make_candidates(
    batch: int, length: int, width: int, heads: int, dropout: float
) -> dict[str, tuple[nn.Module, Callable[[nn.Module, Tensor], Tensor]]]:
    """name -> (module, call(module, x)); every module in train mode with the given dropout."""
    gen = torch.Generator().manual_seed(0)
    pad = padding_mask(batch, length, gen)  # (B, T)
    pad_bool = pad.bool()[:, None, None, :]  # (B, 1, 1, T), True = may attend
    key_padding = ~pad.bool()  # (B, T), torch MHA's polarity: True = ignore
    rotary = RotaryEmbedding(width // heads, length)(torch.arange(length)[None])  # 2 x (1, T, D/2)
    candidates = {
        "ours pad": (
            MultiHeadAttention(width, heads, dropout),
            lambda m, x: m(x, attention_mask=pad),
        ),
        "floor pad": (Floor(width, heads, dropout), lambda m, x: m(x, pad_bool, False)),
        "ours causal": (MultiHeadAttention(width, heads, dropout), lambda m, x: m(x, causal=True)),
        "floor causal": (Floor(width, heads, dropout), lambda m, x: m(x, None, True)),
        "ours rope": (
            MultiHeadAttention(width, heads, dropout),
            lambda m, x: m(x, causal=True, rotary=rotary),
        ),
        "ours gqa": (
            MultiHeadAttention(width, heads, dropout, num_kv_heads=heads // 2),
            lambda m, x: m(x, causal=True),
        ),
        "ours plain": (
            MultiHeadAttention(width, heads, dropout),
            lambda m, x: m(x, attention_mask=pad, need_weights=True)[0],
        ),
        "torch MHA": (
            nn.MultiheadAttention(width, heads, dropout=dropout, batch_first=True),
            lambda m, x: m(x, x, x, key_padding_mask=key_padding, need_weights=False)[0],
        ),
    }
    for module, _ in candidates.values():
        module.train()
    return candidates


def run_once(module: nn.Module, call: Callable, x: Tensor, backward: bool) -> float:
    start = time.perf_counter()
    if backward:
        call(module, x).sum().backward()
    else:
        with torch.no_grad():
            call(module, x)
    return time.perf_counter() - start


def bench_case(
    shape: tuple[int, int, int, int], dropout: float, repeats: int, warmup: int
) -> dict[tuple[str, bool], list[float]]:
    """Seconds per repeat for each (candidate, backward), one shape and dropout, interleaved."""
    batch, length, width, heads = shape
    torch.manual_seed(0)
    candidates = make_candidates(batch, length, width, heads, dropout)
    x = torch.randn(batch, length, width, requires_grad=True)  # (B, T, d)
    keys = [(name, backward) for name in candidates for backward in (False, True)]
    for name, backward in keys:
        for _ in range(warmup):
            run_once(*candidates[name], x, backward)
    times: dict[tuple[str, bool], list[float]] = {key: [] for key in keys}
    order = list(keys)
    rng = random.Random(0)
    for _ in range(repeats):
        rng.shuffle(order)
        for name, backward in order:
            module, call = candidates[name]
            module.zero_grad(set_to_none=True)
            x.grad = None
            times[(name, backward)].append(run_once(module, call, x, backward))
    return times


COLUMNS = [
    "ours pad",
    "floor pad",
    "ours causal",
    "floor causal",
    "ours rope",
    "ours gqa",
    "ours plain",
    "torch MHA",
]
RATIOS = [
    ("ours pad", "floor pad"),
    ("ours causal", "floor causal"),
    ("ours rope", "floor causal"),
    ("ours gqa", "floor causal"),
    ("ours plain", "floor pad"),
    ("torch MHA", "floor pad"),
]


def paired_ratio(times: dict, a: str, b: str, backward: bool) -> float:
    """Median over repeats of a/b measured in the same repeat: robust to slow load drift."""
    pairs = zip(times[(a, backward)], times[(b, backward)], strict=True)
    return statistics.median(ta / tb for ta, tb in pairs)


def print_table(rows: list[tuple[tuple, float, bool, dict]]) -> None:
    ratio_names = [
        "ours pad/floor",
        "ours caus/floor",
        "rope/floor",
        "gqa/floor",
        "plain/floor",
        "MHA/floor",
    ]
    head = f"{'B,T,width,heads':<17}{'drop':>5} {'pass':<8}"
    head += "".join(f"{c:>13}" for c in COLUMNS) + "".join(f"{n:>16}" for n in ratio_names)
    print(
        "times in ms (median over repeats); ratios: median over repeats of the per-repeat "
        "ratio to the floor with the same mask type"
    )
    print(head)
    print("-" * len(head))
    for shape, dropout, backward, times in rows:
        step = "fwd+bwd" if backward else "fwd"
        line = f"{','.join(map(str, shape)):<17}{dropout:>5.1f} {step:<8}"
        line += "".join(f"{statistics.median(times[(c, backward)]) * 1e3:>13.2f}" for c in COLUMNS)
        line += "".join(f"{paired_ratio(times, a, b, backward):>16.3f}" for a, b in RATIOS)
        print(line, flush=True)


def _status_kib(field: str) -> int:
    """A field of /proc/self/status in KiB (VmRSS: resident now, VmHWM: peak resident)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith(field + ":"):
            return int(line.split()[1])
    raise KeyError(field)


def measure_memory(name: str, shape: tuple[int, int, int, int]) -> int:
    """Extra peak RSS (bytes) of one forward+backward, in this (fresh) process."""
    batch, length, width, heads = shape
    torch.manual_seed(0)
    module, call = make_candidates(batch, length, width, heads, 0.0)[name]
    warm_module, warm_call = make_candidates(2, 16, width, heads, 0.0)[name]
    warm_call(warm_module, torch.randn(2, 16, width)).sum().backward()
    x = torch.randn(batch, length, width, requires_grad=True)  # (B, T, d)
    # Importing torch peaks higher than one small pass, so the lifetime peak would hide it:
    # reset the peak-RSS mark to the current RSS first (Linux: "5" > /proc/self/clear_refs).
    Path("/proc/self/clear_refs").write_text("5")
    before = _status_kib("VmRSS")
    call(module, x).sum().backward()
    return (_status_kib("VmHWM") - before) * 1024


def memory_in_subprocess(name: str, shape: tuple[int, int, int, int]) -> int:
    result = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.attention",
            "--memory-child",
            name,
            "--memory-shape",
            ",".join(map(str, shape)),
        ],
        check=True,
        capture_output=True,
        text=True,
    )
    return int(result.stdout.strip().splitlines()[-1])


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument(
        "--quick", action="store_true", help="first shape only, 3 repeats, memory at T=256"
    )
    parser.add_argument(
        "--repeats",
        type=int,
        default=None,
        help="timed runs per candidate (default 30, 3 with --quick)",
    )
    parser.add_argument("--warmup", type=int, default=3, help="untimed runs per candidate")
    parser.add_argument("--no-memory", action="store_true", help="skip the memory measurement")
    parser.add_argument("--memory-child", help=argparse.SUPPRESS)
    parser.add_argument("--memory-shape", help=argparse.SUPPRESS)
    args = parser.parse_args()

    if args.memory_child:
        shape = tuple(int(v) for v in args.memory_shape.split(","))
        print(measure_memory(args.memory_child, shape))  # type: ignore[arg-type]
        return

    repeats = args.repeats or (3 if args.quick else 30)
    shapes = SHAPES[:1] if args.quick else SHAPES
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads, float32 CPU, "
        f"{repeats} repeats, {args.warmup} warm-up"
    )
    rows = []
    for shape in shapes:
        for dropout in DROPOUTS:
            times = bench_case(shape, dropout, repeats, args.warmup)
            rows.extend((shape, dropout, backward, times) for backward in (False, True))
    print_table(rows)

    if args.no_memory:
        return
    mem_shape = (4, 256, 256, 8) if args.quick else MEMORY_SHAPE
    print(
        f"\npeak memory of forward+backward, dropout 0, (B,T,width,heads)={mem_shape} "
        "(extra max RSS in a fresh process, median of 3)"
    )
    peaks = {}
    for name in ("ours pad", "ours causal", "ours plain"):
        peaks[name] = statistics.median(memory_in_subprocess(name, mem_shape) for _ in range(3))
        print(f"  {name:<12}{peaks[name] / 2**20:>10.1f} MiB", flush=True)
    ratio = peaks["ours pad"] / peaks["ours plain"]
    print(f"  ours pad / ours plain = {ratio:.3f}  (target <= 0.6)")


if __name__ == "__main__":
    main()
