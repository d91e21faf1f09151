"""Streaming data: ``data.streaming=true`` reads the source as a stream, tokenized and packed
as training goes, sharded by rank and DataLoader worker, with an exact resume (README.md, this
folder's guide)."""

from conf.features import Feature

FEATURE = Feature(name="streaming", data_stream="features.streaming.stream")
