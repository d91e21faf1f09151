"""Training-step benchmark: our Lightning task through ``lightning.Trainer`` vs a bare loop.

Usage::

    python -m bench.train_step                 # both shapes, 5 rounds, ~3 min on 2 cores
    python -m bench.train_step --quick         # 2 rounds, fewer steps
    python -m bench.train_step --shape shakespeare_char --rounds 9
    python -m bench.train_step --document-mask --shape shakespeare_char --max-seq-len 256
    python -m bench.train_step --shape default --precision bf16-mixed --compile \
        --candidates lightning "bare fused"

Candidates, same model (``models.transformer.Decoder``), same initial weights, same batches:

- ``lightning``: ``training.task.CausalLMTask`` trained by ``lightning.Trainer`` configured as
  train.py configures it (conf/trainer/cpu.yaml: gradient clipping 1.0, ``log_every_n_steps``
  10; no logger, no progress bar, no checkpointing, no model summary).
- ``lightning muon``: the same with ``optim=muon`` (conf/optim/muon.yaml: ``torch.optim.Muon``
  for the blocks' matrices, AdamW for the rest): its ratio to ``lightning`` is Muon's per-step
  overhead. After the table, "Muon's floor" gives the least that overhead can be: the FLOPs
  of its Newton-Schulz iterations at the device's bf16 rate for a 1024^3 matmul, as a share
  of the ``lightning`` step.
- ``bare``: a plain PyTorch loop written here: AdamW with the same two parameter groups
  (decay on matrices only), the same warmup-cosine LambdaLR, ``clip_grad_norm_(1.0)``,
  ``zero_grad(set_to_none=True)``, ``F.cross_entropy`` on the logits.

Both read the same pre-built batches through a DataLoader (``batch_size=None``), so the data
pipeline is not what is compared. A step's time is the wall time between consecutive step ends
(data, forward, backward, clipping, optimiser, scheduler, logging); the first ``--warmup``
steps of every run are dropped. The candidates alternate, one run each per round (order
reversed every other round); a ratio is the median over rounds of (median a / median b)
in that round.

``bare fused`` is the bare loop with ``AdamW(fused=True)``, the optimiser our task uses on
CPU and CUDA: the like-for-like comparison. ``bare`` (torch's default AdamW, as nanoGPT runs on
the CPU) shows what the fused optimiser is worth.

``--document-mask`` compares ``bare fused docmask`` (the batches carry ``document_ids``, as
``data.document_mask=true`` gives them: every attention layer gets an explicit boolean
[B, 1, T, T] mask) with ``bare fused`` (SDPA's ``is_causal``, no mask) and nothing else.
Token 0 plays the EOS, so the random tokens make documents of about ``vocab_size`` tokens
(65 for shakespeare_char); the mask's cost does not depend on where the boundaries fall.
``--max-seq-len`` changes the context of the shapes (e.g. 256 for a longer one).

``--precision bf16-mixed`` trains every candidate under bfloat16 autocast (Lightning's
plugin; ``torch.autocast`` in the bare loops), ``--compile`` compiles the network first
(``torch.compile``, inductor: ``trainer.compile=true``'s ``training.compile.compile_network``
in ``lightning``, ``Module.compile`` in the bare loops). The "1st step" column is the median
over rounds of each run's first step, from the start of training (compilation included): the
price a run pays once, which the steady-state median leaves out. Inductor keeps what it
compiled in an on-disk cache, so a candidate that compiles a graph already compiled (by an
earlier candidate or process) pays less than a first run does.

Peak RSS: each candidate runs once more alone in a fresh process (``VmHWM``).
On CUDA (``--device cuda``, bf16-mixed autocast in both) it also prints MFU from
``Decoder.flops_per_token()`` and the device's peak FLOP/s.
"""

from __future__ import annotations

import argparse
import functools
import inspect
import json
import logging
import statistics
import subprocess
import sys
import time
from pathlib import Path

import torch
import torch.nn.functional as F

from bench.launch import ROOT
from conf.schema import OptimConfig
from data.collate import DocumentCollator, collate_blocks
from data.config import DataConfig
from models.config import ModelConfig
from models.transformer import Decoder
from training.task import warmup_cosine

# name -> (Hydra overrides, vocabulary size of that run's tokenizer). Both with AdamW and
# learned positions, as the bare loop: `python train.py`'s own Muon and rotary positions
# are the ``lightning muon`` candidate and bench.attention's ``ours rope``.
RUNS = {
    # `python train.py`'s shape: BPE of 2048 on the built-in corpus
    "default": (["optim=adamw", "model.position=learned"], 2048),
    "shakespeare_char": (["experiment=shakespeare_char"], 65),  # characters of Shakespeare
}


def _compose(shape: str, *extra: str) -> tuple[dict, int, dict]:
    """(model config dict, batch size, optim dict) exactly as train.py would compose them."""
    from hydra import compose, initialize_config_dir
    from omegaconf import OmegaConf

    overrides, vocab_size = RUNS[shape]
    with initialize_config_dir(config_dir=str(ROOT / "conf"), version_base="1.3"):
        config = compose(config_name="config", overrides=[*overrides, *extra])
        cfg = OmegaConf.to_container(config)
    model = {**cfg["model"], "vocab_size": vocab_size, "pad_token_id": 0}
    return model, cfg["data"]["batch_size"], cfg["optim"]


SHAPES = {name: _compose(name) for name in RUNS}
MUON_OPTIM = {name: _compose(name, "optim=muon")[2] for name in RUNS}  # optim=muon's optim
TOTAL_STEPS = 2000  # the schedule's length: only its shape matters here


def model_config(shape: str) -> ModelConfig:
    model, _, _ = SHAPES[shape]
    return ModelConfig.from_dict(model)


def make_batches(
    shape: str, count: int, seed: int = 0, document_mask: bool = False
) -> list[dict[str, torch.Tensor]]:
    """``count`` random [B, T] next-token batches (the candidates see the same tokens); with
    ``document_mask`` they carry document ids too, token 0 playing the EOS."""
    overrides, batch_size, _ = SHAPES[shape]
    gen = torch.Generator().manual_seed(seed)
    blocks = torch.randint(
        overrides["vocab_size"], (count, batch_size, overrides["max_seq_len"] + 1), generator=gen
    ).numpy()  # (count, B, T + 1)
    collate = DocumentCollator(collate_blocks, eos_id=0) if document_mask else collate_blocks
    return [collate(list(b)) for b in blocks]


def loader(batches: list[dict[str, torch.Tensor]]) -> torch.utils.data.DataLoader:
    return torch.utils.data.DataLoader(batches, batch_size=None, shuffle=False)


# --------------------------------------------------------------------------- candidates


def _compile(network: torch.nn.Module) -> None:
    """``trainer.compile=true``'s compilation; an error where it would fall back to eager."""
    from training.compile import compile_network

    note = compile_network(network)
    if note:
        raise SystemExit(f"--compile: {note}")


def run_lightning(
    shape: str, steps: int, device: str, precision: str, compiled: bool = False, muon: bool = False
) -> list[float]:
    """Seconds per step of ``CausalLMTask`` under ``lightning.Trainer``, every step (the
    first from the start of training)."""
    import lightning as L
    from lightning.pytorch.callbacks import Callback

    from training.task import CausalLMTask

    logging.getLogger("lightning.pytorch").setLevel(logging.WARNING)

    class StepTimer(Callback):
        def __init__(self) -> None:
            self.ends: list[float] = []

        def on_train_start(self, trainer, pl_module) -> None:
            self.ends.append(time.perf_counter())

        def on_train_batch_end(self, trainer, pl_module, outputs, batch, batch_idx) -> None:
            if device == "cuda":
                torch.cuda.synchronize()
            self.ends.append(time.perf_counter())

    optim = MUON_OPTIM[shape] if muon else SHAPES[shape][2]
    torch.manual_seed(0)
    task = CausalLMTask(
        model_config=model_config(shape),
        optim_config=OptimConfig(**optim),
        tokenizer_json="{}",
        data_config=DataConfig(),
        chars_per_token={},
        total_steps=TOTAL_STEPS,
    )
    if compiled:
        _compile(task.model)
    timer = StepTimer()
    trainer = L.Trainer(
        accelerator="gpu" if device == "cuda" else "cpu",
        devices=1,
        precision=precision,
        max_steps=steps,
        gradient_clip_val=1.0,
        log_every_n_steps=10,
        logger=False,
        enable_checkpointing=False,
        enable_progress_bar=False,
        enable_model_summary=False,
        num_sanity_val_steps=0,
        limit_val_batches=0,
        callbacks=[timer],
    )
    trainer.fit(task, train_dataloaders=loader(make_batches(shape, steps)))
    return [b - a for a, b in zip(timer.ends, timer.ends[1:], strict=False)]


def run_bare(
    shape: str,
    steps: int,
    device: str,
    precision: str,
    compiled: bool = False,
    fused: bool = False,
    document_mask: bool = False,
) -> list[float]:
    """Seconds per step of a plain PyTorch loop, every step (the first from its start)."""
    _, _, optim_cfg = SHAPES[shape]
    torch.manual_seed(0)
    model = Decoder(model_config(shape)).to(device)
    model.train()
    if compiled:
        _compile(model)
    params = [p for p in model.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(
        [
            {
                "params": [p for p in params if p.dim() >= 2],
                "weight_decay": optim_cfg["weight_decay"],
            },
            {"params": [p for p in params if p.dim() < 2], "weight_decay": 0.0},
        ],
        lr=optim_cfg["lr"],
        betas=(optim_cfg["beta1"], optim_cfg["beta2"]),
        fused=fused or None,
    )
    scheduler = torch.optim.lr_scheduler.LambdaLR(
        optimizer,
        lambda step: warmup_cosine(
            step,
            warmup_steps=optim_cfg["warmup_steps"],
            total_steps=TOTAL_STEPS,
            min_ratio=optim_cfg["min_lr_ratio"],
        ),
    )
    autocast = torch.autocast(device, dtype=torch.bfloat16, enabled=precision == "bf16-mixed")
    ends = [time.perf_counter()]
    for batch in loader(make_batches(shape, steps, document_mask=document_mask)):
        input_ids = batch["input_ids"].to(device, non_blocking=True)
        labels = batch["labels"].to(device, non_blocking=True)
        document_ids = batch.get("document_ids")
        if document_ids is not None:
            document_ids = document_ids.to(device, non_blocking=True)
        with autocast:
            logits = model(input_ids, document_ids=document_ids)  # (B, T, V)
            loss = F.cross_entropy(logits.flatten(0, 1).float(), labels.flatten())
        loss.backward()
        torch.nn.utils.clip_grad_norm_(model.parameters(), 1.0)
        optimizer.step()
        optimizer.zero_grad(set_to_none=True)
        scheduler.step()
        if device == "cuda":
            torch.cuda.synchronize()
        ends.append(time.perf_counter())
    return [b - a for a, b in zip(ends, ends[1:], strict=False)]


CANDIDATES = {
    "lightning": run_lightning,
    "lightning muon": functools.partial(run_lightning, muon=True),
    "bare": run_bare,
    "bare fused": functools.partial(run_bare, fused=True),
    "bare fused docmask": functools.partial(run_bare, fused=True, document_mask=True),
}
DEFAULT_CANDIDATES = ["lightning", "lightning muon", "bare", "bare fused"]
DOCUMENT_MASK_CANDIDATES = ["bare fused", "bare fused docmask"]
# (numerator, denominator, target): ratios measured in the same round
RATIOS = [
    ("lightning", "bare fused", 1.05),
    ("lightning", "bare", 1.05),
    ("lightning muon", "lightning", 1.15),
    ("bare fused docmask", "bare fused", None),
]


# --------------------------------------------------------------------------- measurement


def peak_rss_child(
    shape: str,
    candidate: str,
    steps: int,
    device: str,
    precision: str,
    compiled: bool,
    max_seq_len: int | None,
) -> int:
    """Peak RSS (bytes) of a fresh process that runs one candidate for ``steps`` steps."""
    context = [] if max_seq_len is None else ["--max-seq-len", str(max_seq_len)]
    context += ["--compile"] if compiled else []
    out = subprocess.run(
        [
            sys.executable,
            "-m",
            "bench.train_step",
            "--child",
            candidate,
            "--shape",
            shape,
            "--steps",
            str(steps),
            "--device",
            device,
            "--precision",
            precision,
            *context,
        ],
        check=True,
        capture_output=True,
        text=True,
        cwd=ROOT,
    ).stdout
    return json.loads(out.strip().splitlines()[-1])["peak_rss"]


def _peak_rss() -> int:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) * 1024
    return 0


def peak_flops(device: str, precision: str) -> float | None:
    if device != "cuda":
        return None
    from lightning.fabric.utilities.throughput import get_available_flops

    dtype = torch.bfloat16 if precision == "bf16-mixed" else torch.float32
    return get_available_flops(torch.device("cuda"), dtype)


def bench_shape(
    shape: str,
    names: list[str],
    rounds: int,
    steps: int,
    warmup: int,
    device: str,
    precision: str,
    compiled: bool,
    memory: bool,
    max_seq_len: int | None,
) -> dict:
    """The candidates ``names`` at one shape, alternating over ``rounds``."""
    times: dict[str, list[float]] = {name: [] for name in names}
    first: dict[str, list[float]] = {name: [] for name in names}
    per_round: list[dict[str, float]] = []
    for index in range(rounds):
        order = names if index % 2 == 0 else names[::-1]
        medians = {}
        for name in order:
            all_steps = CANDIDATES[name](shape, steps + warmup + 1, device, precision, compiled)
            first[name].append(all_steps[0])
            step_times = all_steps[1 + warmup :]
            times[name].extend(step_times)
            medians[name] = statistics.median(step_times)
        per_round.append(medians)
        print(
            f"  {shape} round {index + 1}/{rounds}: "
            + ", ".join(f"{n} {medians[n] * 1e3:.2f} ms" for n in names),
            flush=True,
        )
    overrides, batch_size, _ = SHAPES[shape]
    tokens = batch_size * overrides["max_seq_len"]
    result = {
        "shape": f"{shape} T={overrides['max_seq_len']}",
        "candidates": names,
        "tokens_per_step": tokens,
        "per_round": per_round,
        "flops_per_token": Decoder(model_config(shape)).flops_per_token(),
        "ratios": {
            f"{a}/{b}": sorted(r[a] / r[b] for r in per_round)
            for a, b, _ in RATIOS
            if a in names and b in names
        },
    }
    for name, values in times.items():
        ms = statistics.median(values) * 1e3
        rounds_ms = [r[name] * 1e3 for r in per_round]
        result[name] = {
            "ms": ms,
            "round_ms": (min(rounds_ms), max(rounds_ms)),
            "first_step_s": statistics.median(first[name]),
            "tokens_per_s": tokens / ms * 1e3,
        }
        if memory:
            result[name]["peak_rss"] = peak_rss_child(
                shape, name, 30, device, precision, compiled, max_seq_len
            )
    return result


def print_table(results: list[dict], device: str, precision: str, compiled: bool) -> None:
    peak = peak_flops(device, precision)
    print(
        f"\ntorch {torch.__version__}, {torch.get_num_threads()} threads, {device}, "
        f"{precision}{', torch.compile' if compiled else ''}; ms per steady-state step "
        "(median over all rounds); 1st step: seconds from the start of training (median over "
        "rounds); peak RSS of a fresh process running that candidate alone"
    )
    head = f"{'shape':<24}{'candidate':<20}{'ms/step':>9}{'rounds (min-max)':>18}"
    head += f"{'1st step':>10}{'tokens/s':>11}{'peak RSS':>10}"
    head += f"{'MFU':>7}" if peak else ""
    print(head)
    print("-" * len(head))
    for res in results:
        for name in res["candidates"]:
            row = res[name]
            rss = f"{row['peak_rss'] / 2**20:.0f} MiB" if "peak_rss" in row else "-"
            low, high = row["round_ms"]
            line = f"{res['shape']:<24}{name:<20}{row['ms']:>9.2f}{f'{low:.2f}-{high:.2f}':>18}"
            line += f"{row['first_step_s']:>9.2f}s{row['tokens_per_s']:>11,.0f}{rss:>10}"
            if peak:
                line += f"{row['tokens_per_s'] * res['flops_per_token'] / peak:>7.1%}"
            print(line)
    print(
        "\nratios: median over rounds of the per-round ratio of medians (same round, same "
        "load), and their range over the rounds"
    )
    for res in results:
        for a, b, target in RATIOS:
            if f"{a}/{b}" not in res["ratios"]:
                continue
            per_round = res["ratios"][f"{a}/{b}"]
            value = statistics.median(per_round)
            spread = f"{per_round[0]:.3f}-{per_round[-1]:.3f}"
            verdict = (
                ""
                if target is None
                else (f"(target <= {target}: {'ok' if value <= target else 'MISSED'})")
            )
            print(f"  {res['shape']:<24}{a + ' / ' + b:<40}{value:>7.3f}  {spread}  {verdict}")


def newton_schulz_gflop(shape: str) -> float:
    """GFLOP of one Muon step's Newton-Schulz iterations over the blocks' matrices: per
    iteration on a matrix of r <= c sides, X X^T (2 r^2 c), its square (2 r^3) and the product
    with X (2 r^2 c), as training/optim.py computes them."""
    steps = inspect.signature(torch.optim.Muon).parameters["ns_steps"].default
    flops = 0
    for param in Decoder(model_config(shape)).blocks.parameters():
        if param.dim() == 2:
            r, c = sorted(param.shape)
            flops += steps * (4 * r * r * c + 2 * r**3)
    return flops / 1e9


def bf16_matmul_gflops(device: str, budget_s: float = 2.0) -> float:
    """This device's bfloat16 matmul rate (GFLOP/s): the median of 20 [1024, 1024] products
    after 5 untimed ones, or of as many as ``budget_s`` allows each (at least 3 after 1):
    a CPU without native bfloat16 takes seconds a product."""
    a = torch.randn(1024, 1024, device=device, dtype=torch.bfloat16)

    def seconds_of_one_product() -> float:
        start = time.perf_counter()
        a @ a
        if device == "cuda":
            torch.cuda.synchronize()
        return time.perf_counter() - start

    warmup = [seconds_of_one_product()]
    while len(warmup) < 5 and sum(warmup) < budget_s:
        warmup.append(seconds_of_one_product())
    times: list[float] = []
    while len(times) < 20 and (len(times) < 3 or sum(times) < budget_s):
        times.append(seconds_of_one_product())
    return 2 * 1024**3 / statistics.median(times) / 1e9


def print_newton_schulz_floor(results: list[dict], device: str) -> None:
    """The least per-step overhead Muon can have here: its Newton-Schulz FLOPs at the
    device's bf16 matmul rate, against the AdamW step (``lightning``)."""
    measured = [r for r in results if "lightning" in r["candidates"] and "lightning muon" in r]
    if not measured:
        return
    rate = bf16_matmul_gflops(device)
    print(f"\nMuon's floor: Newton-Schulz FLOPs at the bf16 matmul rate ({rate:,.0f} GFLOP/s)")
    for res in measured:
        gflop = newton_schulz_gflop(res["shape"].split()[0])
        ms = gflop / rate * 1e3
        print(
            f"  {res['shape']:<24}{gflop:.2f} GFLOP a step >= {ms:.2f} ms = "
            f"{ms / res['lightning']['ms']:.1%} of the lightning step, before any other work"
        )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shape", choices=[*SHAPES, "all"], default="all")
    parser.add_argument("--rounds", type=int, default=None, help="default 5 (2 with --quick)")
    parser.add_argument(
        "--steps", type=int, default=None, help="timed steps per run (default 60, 25 with --quick)"
    )
    parser.add_argument("--warmup", type=int, default=10, help="steps dropped per run")
    parser.add_argument("--device", default="cuda" if torch.cuda.is_available() else "cpu")
    parser.add_argument(
        "--precision",
        choices=["32-true", "bf16-mixed"],
        default=None,
        help="32-true (CPU default) or bf16-mixed (CUDA default)",
    )
    parser.add_argument(
        "--compile", action="store_true", help="torch.compile the network (trainer.compile)"
    )
    parser.add_argument("--quick", action="store_true")
    parser.add_argument("--no-memory", action="store_true")
    parser.add_argument("--json", help="also write the results to this file")
    parser.add_argument(
        "--document-mask",
        action="store_true",
        help="compare bare fused with document ids (explicit mask) against without (is_causal)",
    )
    parser.add_argument("--max-seq-len", type=int, help="the shapes' context (default theirs)")
    parser.add_argument(
        "--candidates",
        nargs="+",
        choices=list(CANDIDATES),
        help="the candidates to run (default: the four of the table above, or --document-mask's)",
    )
    parser.add_argument("--child", choices=list(CANDIDATES), help=argparse.SUPPRESS)
    args = parser.parse_args()
    precision = args.precision or ("bf16-mixed" if args.device == "cuda" else "32-true")
    if args.device == "cuda":
        torch.backends.cuda.matmul.allow_tf32 = True
    if args.max_seq_len is not None:
        SHAPES.update({s: _compose(s, f"model.max_seq_len={args.max_seq_len}") for s in SHAPES})
    if args.child:
        CANDIDATES[args.child](args.shape, args.steps, args.device, precision, args.compile)
        print(json.dumps({"peak_rss": _peak_rss()}))
        return
    rounds = args.rounds or (2 if args.quick else 5)
    steps = args.steps or (25 if args.quick else 60)
    shapes = list(SHAPES) if args.shape == "all" else [args.shape]
    names = args.candidates or (
        DOCUMENT_MASK_CANDIDATES if args.document_mask else DEFAULT_CANDIDATES
    )
    results = [
        bench_shape(
            s,
            names,
            rounds,
            steps,
            args.warmup,
            args.device,
            precision,
            args.compile,
            not args.no_memory,
            args.max_seq_len,
        )
        for s in shapes
    ]
    print_table(results, args.device, precision, args.compile)
    print_newton_schulz_floor(results, args.device)
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=2))


if __name__ == "__main__":
    main()
