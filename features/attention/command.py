"""``mode=attention``: every layer's and head's attention map over a prompt, as one PNG."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path
from typing import Any

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402  (the backend must be chosen first)
import torch  # noqa: E402
from matplotlib.figure import Figure  # noqa: E402

from analysis.report import Report  # noqa: E402
from analysis.report_columns import run_dirs  # noqa: E402
from conf.schema import Settings  # noqa: E402
from modes.inference import encode_prompt, load_for_inference  # noqa: E402
from modes.report import refresh  # noqa: E402

MAPS_FILE = "checkpoints/attention.png"  # beside the checkpoint, in its run directory


def run(settings: Settings, callbacks: Sequence[Any] = ()) -> dict[str, Any]:
    loaded, tokenizer = load_for_inference(settings)
    prompt = settings.job.prompt or "The quick brown fox"
    context = loaded.config.max_seq_len
    ids = encode_prompt(tokenizer, prompt, context)[-context:]  # what generate reads, too
    if not ids:
        raise ValueError(f"prompt={prompt!r} encodes to no tokens; give a non-empty prompt")
    with torch.inference_mode():
        _, attentions = loaded.model(torch.tensor([ids]), output_attentions=True)
    # Decoded one by one, so byte-level BPE shows " class" rather than "Ġclass".
    tokens = [tokenizer.decode([i]) or tokenizer.id_to_token(i) for i in ids]
    out = Path(settings.job.ckpt_path).parent / Path(MAPS_FILE).name
    maps = [a[0].numpy() for a in attentions]
    fig = attention_figure(maps, tokens, title=f"{loaded.config.arch}: {prompt!r}")
    fig.savefig(out, dpi=100)
    plt.close(fig)
    print(f"wrote {out}")
    refresh(Path(settings.job.ckpt_path))  # its run's page links the maps
    return {"png": str(out), "tokens": tokens}


def add_attention_maps(report: Report) -> None:
    """The maps' file among the run files of ``report`` (``Feature.report``), once drawn."""
    if any((d / MAPS_FILE).is_file() for d in run_dirs(report.root, report.runs).values()):
        report.run_files.append(MAPS_FILE)


def attention_figure(attentions: Sequence[Any], tokens: Sequence[str], title: str = "") -> Figure:
    """A grid of every layer's (rows) and head's (columns) attention map over ``tokens``;
    ``attentions``: one array per layer of shape [H, T, T] (query rows, key columns)."""
    num_layers, num_heads = len(attentions), attentions[0].shape[0]
    size = max(2.0, 0.25 * len(tokens))
    fig, axes = plt.subplots(
        num_layers, num_heads, figsize=(size * num_heads, size * num_layers), squeeze=False
    )
    for layer, layer_maps in enumerate(attentions):
        for head in range(num_heads):
            ax = axes[layer][head]
            ax.imshow(layer_maps[head], cmap="Blues", vmin=0.0, vmax=1.0)
            ax.set_title(f"layer {layer} head {head}", fontsize=8)
            ax.set_xticks(range(len(tokens)), tokens, rotation=90, fontsize=6)
            ax.set_yticks(range(len(tokens)), tokens, fontsize=6)
    if title:
        fig.suptitle(title)
    fig.tight_layout()
    return fig
