"""Attention maps: ``mode=attention`` draws every layer's and head's attention over a prompt
(README.md here)."""

from conf.features import Feature

FEATURE = Feature(
    name="attention",
    modes={"attention": "features.attention.command"},
    report="features.attention.command:add_attention_maps",
)
