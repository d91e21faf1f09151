"""The export families' declarations (``training/hf_families.py``): every ``ModelConfig`` field
decided by every family, and every refusal one clear error naming its field.

The walk over ``dataclasses.fields(ModelConfig)`` is what makes a new model option fail until
its export is decided: mapped by a family (exported faithfully, with a logits test in
``tests/training/test_export_hf.py``) or refused by name for the values it cannot reproduce.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from models.config import ARCHS, POSITIONS, ModelConfig
from training.hf_families import BERT, GPT2, GPT_NEOX, HF_FAMILIES, HFFamily, hf_family


def undecided_fields(config_class: type, family: HFFamily) -> list[str]:
    """The fields of ``config_class`` the family neither maps nor refuses."""
    refused = {refusal.field for refusal in family.refusals}
    return [
        field.name
        for field in dataclasses.fields(config_class)
        if field.name not in family.maps and field.name not in refused
    ]


def family_config(family: HFFamily, **overrides: Any) -> ModelConfig:
    """A config the family takes, with its LayerNorm layout, then ``overrides``."""
    fields: dict[str, Any] = dict(
        vocab_size=300,
        arch=family.arch,
        position=family.positions[0],
        norm="pre" if family.arch == "decoder" else "post",
    )
    return ModelConfig(**(fields | overrides))


@pytest.mark.parametrize("family", HF_FAMILIES, ids=lambda f: f.name)
def test_every_model_config_field_is_mapped_or_refused(family: HFFamily) -> None:
    undecided = undecided_fields(ModelConfig, family)
    assert not undecided, (
        f"{family.name} neither maps nor refuses ModelConfig field(s) {undecided}: add each to "
        "its maps (and export it) or to its refusals (naming the values it cannot export)"
    )


def test_a_new_field_fails_the_walk_naming_it() -> None:
    # A model option added without an export decision, as a subclass would add it.
    with_new_option = dataclasses.make_dataclass(
        "WithNewOption", [("rope_scaling", float, 1.0)], bases=(ModelConfig,)
    )
    for family in HF_FAMILIES:
        assert undecided_fields(with_new_option, family) == ["rope_scaling"]


@pytest.mark.parametrize("family", HF_FAMILIES, ids=lambda f: f.name)
def test_declarations_name_real_fields_and_decide_each_once(family: HFFamily) -> None:
    names = {field.name for field in dataclasses.fields(ModelConfig)}
    refused = [refusal.field for refusal in family.refusals]
    assert set(family.maps) <= names
    assert set(refused) <= names
    assert len(refused) == len(set(refused))  # one refusal per field: one reason each
    assert not set(family.maps) & set(refused)


def test_every_arch_and_position_is_taken_by_one_family() -> None:
    for arch in ARCHS:
        for position in POSITIONS:
            takers = [f for f in HF_FAMILIES if f.arch == arch and position in f.positions]
            assert len(takers) == 1, (arch, position)
    assert hf_family(family_config(GPT2, position="learned")) is GPT2
    assert hf_family(family_config(GPT2, position="sinusoidal")) is GPT2
    assert hf_family(family_config(GPT2, position="rope")) is GPT_NEOX
    assert hf_family(family_config(BERT, position="rope")) is BERT


# (family, refused field) -> settings that the family refuses for that field alone
REFUSED = {
    ("GPT-2", "norm"): {"norm": "post"},
    ("GPT-2", "num_kv_heads"): {"num_kv_heads": 2},
    ("GPT-NeoX", "norm"): {"norm": "post"},
    ("GPT-NeoX", "num_kv_heads"): {"num_kv_heads": 1},
    ("GPT-NeoX", "embd_dropout"): {"embd_dropout": 0.0},
    ("BERT", "norm"): {"norm": "pre"},
    ("BERT", "num_kv_heads"): {"num_kv_heads": 2},
    ("BERT", "embd_dropout"): {"resid_dropout": 0.2},  # the two rates differ either way
    ("BERT", "position"): {"position": "rope"},
    **{
        (name, field): {field: value}
        for name in ("GPT-2", "GPT-NeoX", "BERT")
        for field, value in (
            ("qk_norm", True),
            ("logit_softcap", 30.0),
            ("unet_skips", True),
            ("value_embeddings", 1),
        )
    },
}
FAMILIES = {family.name: family for family in HF_FAMILIES}


def test_every_refusal_has_a_refused_example() -> None:
    declared = {(f.name, refusal.field) for f in HF_FAMILIES for refusal in f.refusals}
    assert declared == set(REFUSED)


@pytest.mark.parametrize("family", HF_FAMILIES, ids=lambda f: f.name)
def test_the_families_own_settings_export(family: HFFamily) -> None:
    family.check(family_config(family))
    family.check(family_config(family, num_kv_heads=4))  # = num_heads: plain multi-head


@pytest.mark.parametrize(("name", "field"), sorted(REFUSED))
def test_a_refused_value_gives_one_clear_error(name: str, field: str) -> None:
    family = FAMILIES[name]
    cfg = family_config(family, **REFUSED[name, field])
    assert hf_family(cfg) is family
    assert [r.field for r in family.refusals if r.refuses(cfg)] == [field]
    with pytest.raises(ValueError) as error:
        family.check(cfg)
    message = str(error.value)
    assert "\n" not in message
    assert message.count("model.") == 1 and f"model.{field}=" in message
    assert f"no exact {name} equivalent" in message
    assert message.endswith("export.format=safetensors keeps every setting")


def test_several_refused_values_are_one_error_naming_each() -> None:
    cfg = family_config(BERT, norm="pre", position="rope", num_kv_heads=1)
    with pytest.raises(ValueError) as error:
        BERT.check(cfg)
    message = str(error.value)
    for field in ("norm", "position", "num_kv_heads"):
        assert f"model.{field}=" in message


def test_refusals_say_why() -> None:
    def check(cfg: ModelConfig) -> None:
        hf_family(cfg).check(cfg)

    with pytest.raises(ValueError, match=r"model.norm=post \(GPT-2 is pre-LN\)"):
        check(ModelConfig(vocab_size=300, arch="decoder", norm="post"))
    with pytest.raises(ValueError, match=r"model.norm=pre \(BERT is post-LN\)"):
        check(ModelConfig(vocab_size=300, arch="encoder", norm="pre"))
    with pytest.raises(ValueError, match=r"model.position=rope \(BERT adds a learned position"):
        check(ModelConfig(vocab_size=300, arch="encoder", norm="post", position="rope"))
    with pytest.raises(ValueError, match=r"model.num_kv_heads=2 \(GPT-NeoX has one key/value"):
        check(ModelConfig(vocab_size=300, position="rope", num_kv_heads=2))
    with pytest.raises(
        ValueError, match=r"embd_dropout=0.0 differs .*\(GPT-NeoX has one hidden_drop"
    ):
        check(ModelConfig(vocab_size=300, position="rope", embd_dropout=0.0))
    check(ModelConfig(vocab_size=300, arch="decoder", position="rope"))
    check(ModelConfig(vocab_size=300, arch="decoder", embd_dropout=0.0))  # GPT-2
    with pytest.raises(ValueError, match=r"model.num_kv_heads=1 \(BERT has one key/value head"):
        check(ModelConfig(vocab_size=300, arch="encoder", norm="post", num_kv_heads=1))
    check(ModelConfig(vocab_size=300, arch="decoder", num_kv_heads=4))  # = num_heads
