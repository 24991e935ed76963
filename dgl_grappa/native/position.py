"""Where a worker is in training: the position a stop, a resume and a new group of workers go on from.

A worker's trainer keeps one :class:`EpochPosition` (the epoch in progress, its steps done, the steps
taken before it) and one :class:`PartialEpoch` (the losses and batch weights of the epoch in progress so
far): a checkpoint taken inside an epoch stores them, and under ``launch.on_failure: continue`` the
survivor furthest on hands them to a new generation of workers.

Example:
    >>> at = EpochPosition(epoch=3, done=2, before=40)
    >>> at.advanced(), at.next_epoch(48), at.furthest_key(1)
    (EpochPosition(epoch=3, done=3, before=40), EpochPosition(epoch=4, done=0, before=48), (3, 2, -1))
"""

from __future__ import annotations

from dataclasses import dataclass, field, replace


@dataclass(frozen=True)
class EpochPosition:
    """The epoch in progress, its steps done, and the training steps taken before it.

    Attributes:
        epoch: the epoch in progress (the next to train when ``done`` is 0).
        done: its steps already taken.
        before: the training steps of every earlier epoch.
    """

    epoch: int = 0
    done: int = 0
    before: int = 0

    def advanced(self) -> EpochPosition:
        """The position after one more step of this epoch."""
        return replace(self, done=self.done + 1)

    def next_epoch(self, before: int) -> EpochPosition:
        """The start of the next epoch, ``before`` steps taken in all."""
        return EpochPosition(self.epoch + 1, 0, before)

    def furthest_key(self, rank: int) -> tuple[int, int, int]:
        """Orders workers by how far they are (ties: the lowest rank first, as the largest key)."""
        return self.epoch, self.done, -rank


@dataclass
class PartialEpoch:
    """The losses and batch weights of the epoch in progress so far (its record's means at the end).

    Attributes:
        losses: one mean loss per step taken.
        weights: one batch weight per step taken.
    """

    losses: list = field(default_factory=list)
    weights: list = field(default_factory=list)

    def copy(self) -> PartialEpoch:
        """An independent copy (its lists too)."""
        return PartialEpoch(list(self.losses), list(self.weights))
