"""The process's world under mpirun: `mpirun -np N python train.py` gives
every rank a World (rank, size) that collections, readers and the trainer
are created over; alone, world() is a world of one and needs no MPI.  The
rules are the CLI's: every rank makes the same calls in the same order, and
the global batch is the ranks' local batches in rank order."""
from __future__ import annotations

from . import _ember


class World:
    def __init__(self, capsule=None, rank: int = 0, size: int = 1):
        self._capsule = capsule
        self.rank = rank
        self.size = size

    def __repr__(self):
        return f"ember.World(rank={self.rank}, size={self.size})"


_world = None


def world() -> World:
    """This process's world (the same object every call)."""
    global _world
    if _world is None:
        got = _ember.mpi_world()
        _world = World() if got is None else World(*got)
    return _world
