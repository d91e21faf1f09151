"""A sequence classifier on an Encoder or Decoder, laid out as Hugging Face's
``BertForSequenceClassification`` (pooled ``[CLS]``) and ``GPT2ForSequenceClassification``
(the last real token), so that an export is a renaming; one output is a regression's score."""

from __future__ import annotations

from torch import Tensor, nn

from models.transformer import Decoder, Encoder


class SequenceClassifier(nn.Module):
    """Logits [B, K] over ``num_labels`` classes (K=1: a regression's score)."""

    def __init__(self, backbone: Encoder | Decoder, num_labels: int) -> None:
        super().__init__()
        if num_labels < 1:
            raise ValueError(
                f"num_labels={num_labels}: give 2 or more classes, or 1 for a regression"
            )
        self.backbone = backbone
        self.config = backbone.config
        self.num_labels = num_labels
        width = self.config.hidden_size
        is_encoder = isinstance(backbone, Encoder)
        self.pooler = nn.Linear(width, width) if is_encoder else None
        self.dropout = nn.Dropout(self.config.resid_dropout_p if is_encoder else 0.0)
        self.score = nn.Linear(width, num_labels, bias=is_encoder)
        # The backbone keeps its language-model head, so the checkpoint's weights load
        # unchanged; the head gets no gradient, but its tied matrix is the embedding.
        if is_encoder:
            tied = backbone.embeddings.token.weight
            for param in backbone.mlm_head.parameters():
                param.requires_grad_(param is tied)
        for layer in (self.pooler, self.score):
            if layer is not None:  # the backbone's own init: N(0, 0.02), zero bias
                nn.init.normal_(layer.weight, mean=0.0, std=0.02)
                if layer.bias is not None:
                    nn.init.zeros_(layer.bias)

    def forward(
        self,
        input_ids: Tensor,
        attention_mask: Tensor | None = None,
        *,
        token_type_ids: Tensor | None = None,
    ) -> Tensor:
        """input_ids [B, T] (right-padded, mask 1 on real tokens) -> logits [B, K]."""
        hidden = self.backbone.hidden_states(
            input_ids, attention_mask, token_type_ids=token_type_ids
        )  # (B, T, C)
        return self.score(self.dropout(self.pooled(hidden, attention_mask)))  # (B, K)

    def pooled(self, hidden: Tensor, attention_mask: Tensor | None) -> Tensor:
        """[B, T, C] -> [B, C]: the pooled [CLS] state, or the last real token's state."""
        if self.pooler is not None:
            return self.pooler(hidden[:, 0]).tanh()  # (B, C)
        return hidden[range(hidden.shape[0]), last_real_positions(attention_mask, hidden)]


def last_real_positions(attention_mask: Tensor | None, hidden: Tensor) -> Tensor:
    """[B] index of each row's rightmost real token (the last one without a mask)."""
    if attention_mask is None:
        return hidden.new_full((hidden.shape[0],), hidden.shape[1] - 1, dtype=int)
    positions = attention_mask.new_ones(attention_mask.shape).cumsum(-1) - 1  # (B, T)
    return (positions * attention_mask.bool()).argmax(-1)  # (B,)
