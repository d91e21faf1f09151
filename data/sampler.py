"""A training loader that can resume mid-epoch from a checkpoint.

Lightning 2.6 saves `state_dict()` of every train dataloader that has `state_dict` and
`load_state_dict` (fabric's `_Stateful` protocol, checked in `CombinedLoader._state_dicts`)
into the fit loop's checkpoint state, and calls `load_state_dict` before iterating again on
resume; it then calls `sampler.set_epoch(epoch)` at each epoch start. With a sized loader
Lightning does not prefetch, so "batches yielded by the loader" is "batches trained on".
"""

from __future__ import annotations

import itertools
from collections.abc import Iterator, Sized
from typing import Any

from torch.utils.data import DataLoader, DistributedSampler

from common.ranks import rank_and_world_size


class ResumableSampler(DistributedSampler):
    """A seeded permutation per epoch (`seed + epoch`) that can start `skip` samples in.

    Subclassing DistributedSampler keeps Lightning from wrapping it under DDP; each rank
    reads its own slice of the permutation.
    """

    def __init__(self, dataset: Sized, seed: int, shuffle: bool = True) -> None:
        rank, world_size = rank_and_world_size()
        super().__init__(
            dataset,  # type: ignore[arg-type]
            num_replicas=world_size,
            rank=rank,
            shuffle=shuffle,
            seed=seed,
        )
        self.skip = 0  # samples of the current epoch already consumed; used by the next pass

    def set_epoch(self, epoch: int) -> None:
        if epoch != self.epoch:
            self.skip = 0  # a resume point belongs to the epoch it was saved in
        super().set_epoch(epoch)

    def __iter__(self) -> Iterator[int]:
        skip, self.skip = self.skip, 0
        return itertools.islice(super().__iter__(), skip, None)


class ResumableDataLoader(DataLoader):
    """A DataLoader over a `ResumableSampler` that records how far into the epoch it is.

    `len()` stays the full epoch: on resume Lightning counts the batches already trained on.
    """

    sampler: ResumableSampler

    def __init__(self, dataset: Any, sampler: ResumableSampler, **kwargs: Any) -> None:
        super().__init__(dataset, sampler=sampler, **kwargs)
        self._samples_seen = 0

    def __iter__(self) -> Iterator[Any]:
        # A generator: nothing (not even worker start-up) runs before the first batch is
        # requested, so a `set_epoch` or `load_state_dict` made after `iter()` still applies.
        self._samples_seen = self.sampler.skip
        for batch in super().__iter__():
            self._samples_seen = min(self._samples_seen + self.batch_size, self.sampler.num_samples)
            yield batch

    def state_dict(self) -> dict[str, int]:
        return {
            "epoch": self.sampler.epoch,
            "seed": self.sampler.seed,
            "samples_seen": self._samples_seen,
            "num_samples": self.sampler.num_samples,
        }

    def load_state_dict(self, state: dict[str, int]) -> None:
        if state["num_samples"] != self.sampler.num_samples:
            raise ValueError(
                f"cannot resume the train loader: the checkpoint's epoch had "
                f"{state['num_samples']} samples per rank, this one has "
                f"{self.sampler.num_samples} (the data, max_seq_len or device count changed)"
            )
        self.sampler.epoch = state["epoch"]
        self.sampler.seed = state["seed"]
        self.sampler.skip = state["samples_seen"]
        self._samples_seen = state["samples_seen"]
