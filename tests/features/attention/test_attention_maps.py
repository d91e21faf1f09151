"""``mode=attention``: one PNG of every layer's and head's attention map over a prompt."""

from __future__ import annotations

from pathlib import Path

import torch

from features.attention.command import attention_figure
from tests.conftest import train_py
from tests.tiny_models import tiny_model
from train import run


def test_attention_figure_is_layers_by_heads_of_the_maps() -> None:
    model = tiny_model("decoder", num_layers=3, num_heads=4)
    tokens = ["a", "b", "c", "d", "e"]
    with torch.inference_mode():
        _, attentions = model(torch.tensor([[5, 6, 7, 8, 9]]), output_attentions=True)
    maps = [a[0].numpy() for a in attentions]
    fig = attention_figure(maps, tokens, title="t")
    axes = [ax for ax in fig.axes if ax.images]
    assert len(axes) == 3 * 4
    for ax in axes:
        spec = ax.get_subplotspec()
        layer, head = spec.rowspan.start, spec.colspan.start
        assert spec.get_gridspec().get_geometry() == (3, 4)
        assert ax.get_title() == f"layer {layer} head {head}"
        assert (ax.images[0].get_array() == maps[layer][head]).all()
        assert [t.get_text() for t in ax.get_xticklabels()] == tokens


def test_the_maps_of_a_checkpoint_are_drawn_beside_it(tiny_checkpoints, make_cfg) -> None:
    decoder = tiny_checkpoints["decoder"]
    result = run(make_cfg("mode=attention", f"ckpt_path={decoder}", "prompt=The function"))
    png = Path(result["png"])
    assert png == decoder.parent / "attention.png"
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    assert "".join(result["tokens"]) == "The function"
    # The run's page links the maps once they are drawn.
    assert 'href="checkpoints/attention.png"' in (decoder.parents[1] / "report.html").read_text()


def test_a_verbatim_prompt_through_train_py(tiny_checkpoints, tmp_path: Path) -> None:
    decoder = tiny_checkpoints["decoder"]
    (decoder.parent / "attention.png").unlink(missing_ok=True)
    proc = train_py(
        "logger=none",
        "mode=attention",
        f"ckpt_path={decoder}",
        "prompt=The [MASK] is, as ever, = good",
        f"hydra.run.dir={tmp_path / 'run'}",
        cwd=tmp_path,
    )
    assert proc.returncode == 0, proc.stderr
    assert (decoder.parent / "attention.png").is_file()
