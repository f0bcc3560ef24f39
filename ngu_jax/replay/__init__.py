"""Replay: the sequence adder and prioritised sequence replay (NGU App. A).

`SequenceAdder` cuts actor lanes into overlapping fixed-length sequences
(`SequenceItem`s); `PrioritizedReplay` stores them in host memory and samples
them by priority. `ngu_jax.replay.reverb_tables.ReverbReplay` offers the same
interface over a Reverb table; it needs the `[reverb]` extra and is not
imported here.
"""

from ngu_jax.replay.adder import AdderStep
from ngu_jax.replay.adder import SequenceAdder
from ngu_jax.replay.adder import SequenceItem
from ngu_jax.replay.adder import stack_items
from ngu_jax.replay.adder import to_sequence_batch
from ngu_jax.replay import device
from ngu_jax.replay.device import AdderState
from ngu_jax.replay.device import DeviceReplay
from ngu_jax.replay.device import DeviceSequenceAdder
from ngu_jax.replay.device import ReplayState
from ngu_jax.replay.device import make_prioritized_replay
from ngu_jax.replay.device import make_sequence_adder
from ngu_jax.replay.prioritized import PrioritizedReplay
from ngu_jax.replay.prioritized import ReplayNotReadyError
from ngu_jax.replay.prioritized import SumTree

__all__ = (
    "AdderState",
    "AdderStep",
    "DeviceReplay",
    "DeviceSequenceAdder",
    "PrioritizedReplay",
    "ReplayNotReadyError",
    "ReplayState",
    "SequenceAdder",
    "SequenceItem",
    "SumTree",
    "device",
    "make_prioritized_replay",
    "make_sequence_adder",
    "stack_items",
    "to_sequence_batch",
)
