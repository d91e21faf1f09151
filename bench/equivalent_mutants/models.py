"""The equivalent mutants of the sentence scores of minimal pairs (models/ before they moved to
features/pairs/)."""

from __future__ import annotations

from bench.equivalent_mutants.base import Equivalent, variants

_SCORES = "features/pairs/sentence_scores.py"
_SAME_ON_A_CPU = (
    "the tensors go to the network's device: on a CPU, where these tests run, .to(None) and "
    "device=None leave them where .to(device) puts them; only a network on a GPU would see "
    "inputs on another device"
)
# (function, line, mutated line) of the mutants that only move tensors to another device
_DEVICE_MOVES = (
    (
        "decoder_log_likelihoods",
        "device = next(model.parameters()).device",
        "device = None",
    ),
    ("decoder_log_likelihoods", "ids = ids.to(device)", "ids = ids.to(None)"),
    (
        "decoder_log_likelihoods",
        "scored = (lengths - 1).to(device)  # targets per row",
        "scored = (lengths - 1).to(None)  # targets per row",
    ),
    *(
        (
            "decoder_log_likelihoods",
            "real = torch.arange(ids.shape[1] - 1, device=device) < scored[:, None]  # (B, T - 1)",
            f"real = torch.arange(ids.shape[1] - 1, {device}) < scored[:, None]  # (B, T - 1)",
        )
        for device in ("device=None", "")
    ),
    (
        "pseudo_log_likelihoods",
        "device = next(model.parameters()).device",
        "device = None",
    ),
    *(
        (
            "pseudo_log_likelihoods",
            "logits = model(ids.to(device), attention_mask=attention_mask.to(device))",
            after,
        )
        for after in (
            "logits = model(ids.to(None), attention_mask=attention_mask.to(device))",
            "logits = model(ids.to(device), attention_mask=attention_mask.to(None))",
        )
    ),
    *(
        (
            "pseudo_log_likelihoods",
            "logits = logits[rows.to(device), position.to(device)].float()  # (R, V)",
            after,
        )
        for after in (
            "logits = logits[rows.to(None), position.to(device)].float()  # (R, V)",
            "logits = logits[rows.to(device), position.to(None)].float()  # (R, V)",
        )
    ),
    (
        "pseudo_log_likelihoods",
        "picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)",
        "picked = logits.log_softmax(-1).gather(-1, targets.to(None)[:, None])[:, 0]  # (R,)",
    ),
)
_PAIRS_EQUIVALENTS = (
    *(
        Equivalent(_SCORES, function, before, after, _SAME_ON_A_CPU)
        for function, before, after in _DEVICE_MOVES
    ),
    *(
        known
        for part, mutated in (("log_softmax(-1)", "log_softmax(+1)"), ("gather(-1,", "gather(+1,"))
        for known in variants(
            _SCORES,
            "pseudo_log_likelihoods",
            "picked = logits.log_softmax(-1).gather(-1, targets.to(device)[:, None])[:, 0]  # (R,)",
            part,
            (mutated,),
            "the logits here are (R, V), one row per masked token: dimension +1 is dimension -1",
        )
    ),
)
MODELS: tuple[Equivalent, ...] = (*_PAIRS_EQUIVALENTS,)
