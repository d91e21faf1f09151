"""Generation benchmark: ``Decoder.generate`` with and without the KV cache.

Usage::

    python -m bench.generate                 # 256 new tokens, batch 1 and 8, 5 repeats
    python -m bench.generate --new-tokens 128 --repeats 3
    python -m bench.generate --bf16          # then cached generation in float32 vs bf16 autocast

The default GPT (conf/model/gpt.yaml sizes, vocabulary 2048) with ``max_seq_len`` raised to
fit prompt + new tokens, so the cache is used for every step (past ``max_seq_len`` generate
drops the cache by design). Greedy decoding (temperature 0), no EOS, so every run produces
exactly ``--new-tokens`` tokens. Cached and uncached runs alternate; tokens/s counts new
tokens of all rows; the speedup is the median over repeats of uncached time / cached time.
The outputs of both are checked to be identical.

``--bf16`` then times cached generation in float32 against the same under bfloat16 autocast
(what ``trainer.precision=bf16-mixed`` does to a forward pass), alternating, and prints the
share of generated tokens on which the two agree (greedy decoding follows the rounding).
"""

from __future__ import annotations

import argparse
import statistics
import time

import torch

from models.config import ModelConfig
from models.transformer import Decoder


def timed_generate(model: Decoder, prompt: torch.Tensor, new: int, use_cache: bool):
    start = time.perf_counter()
    out = model.generate(prompt, max_new_tokens=new, temperature=0.0, use_cache=use_cache)
    return time.perf_counter() - start, out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--new-tokens", type=int, default=256)
    parser.add_argument("--prompt-tokens", type=int, default=16)
    parser.add_argument("--batch-sizes", default="1,8")
    parser.add_argument("--repeats", type=int, default=5)
    parser.add_argument("--bf16", action="store_true", help="also float32 vs bf16 autocast")
    args = parser.parse_args()

    torch.manual_seed(0)
    cfg = ModelConfig(
        vocab_size=2048,
        max_seq_len=args.prompt_tokens + args.new_tokens,
        dropout=0.0,
        pad_token_id=0,
    )
    model = Decoder(cfg).eval()
    print(
        f"torch {torch.__version__}, {torch.get_num_threads()} threads; decoder "
        f"L={cfg.num_layers} C={cfg.hidden_size} H={cfg.num_heads} V={cfg.vocab_size}; "
        f"prompt {args.prompt_tokens} + {args.new_tokens} new tokens, greedy; median of "
        f"{args.repeats}"
    )
    head = f"{'batch':>5}{'cache ms':>11}{'no-cache ms':>13}{'cache tok/s':>13}"
    head += f"{'no-cache tok/s':>16}{'speedup':>9}"
    print(head)
    print("-" * len(head))
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        prompt = torch.randint(cfg.vocab_size, (batch, args.prompt_tokens))
        timed_generate(model, prompt, 8, True)  # warm-up
        timed_generate(model, prompt, 8, False)
        cached, uncached, speedups = [], [], []
        for _ in range(args.repeats):
            t_cache, out_cache = timed_generate(model, prompt, args.new_tokens, True)
            t_plain, out_plain = timed_generate(model, prompt, args.new_tokens, False)
            if not torch.equal(out_cache, out_plain):
                raise SystemExit("cached and uncached generation differ")
            cached.append(t_cache)
            uncached.append(t_plain)
            speedups.append(t_plain / t_cache)
        tokens = batch * args.new_tokens
        c, u, s = (
            statistics.median(cached),
            statistics.median(uncached),
            statistics.median(speedups),
        )
        verdict = ("ok" if s >= 3 else "MISSED") if batch == 1 else ""
        print(
            f"{batch:>5}{c * 1e3:>11.1f}{u * 1e3:>13.1f}{tokens / c:>13,.0f}"
            f"{tokens / u:>16,.0f}{s:>8.2f}x {verdict}",
            flush=True,
        )
    print("target: KV-cache speedup >= 3x at batch 1")
    if args.bf16:
        compare_bf16(model, args)


def compare_bf16(model: Decoder, args: argparse.Namespace) -> None:
    """Cached generation in float32 against bfloat16 autocast, alternating."""
    print("\ncached generation: float32 vs bfloat16 autocast")
    head = f"{'batch':>5}{'fp32 ms':>10}{'bf16 ms':>10}{'fp32/bf16':>11}{'same tokens':>13}"
    print(head)
    print("-" * len(head))
    for batch in (int(b) for b in args.batch_sizes.split(",")):
        prompt = torch.randint(model.config.vocab_size, (batch, args.prompt_tokens))
        times: dict[str, list[float]] = {"fp32": [], "bf16": []}
        ratios, agree = [], []
        for _ in range(args.repeats):
            t32, out32 = timed_generate(model, prompt, args.new_tokens, True)
            with torch.autocast("cpu", dtype=torch.bfloat16):
                t16, out16 = timed_generate(model, prompt, args.new_tokens, True)
            times["fp32"].append(t32)
            times["bf16"].append(t16)
            ratios.append(t32 / t16)
            new = slice(args.prompt_tokens, None)
            agree.append(float((out32[:, new] == out16[:, new]).float().mean()))
        print(
            f"{batch:>5}{statistics.median(times['fp32']) * 1e3:>10.1f}"
            f"{statistics.median(times['bf16']) * 1e3:>10.1f}{statistics.median(ratios):>10.2f}x"
            f"{statistics.median(agree):>13.1%}",
            flush=True,
        )


if __name__ == "__main__":
    main()
