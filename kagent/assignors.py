"""Public import path of kagent's assignment strategies and of its aiokafka partition assignors.

The strategies (``assign``, ``Member``, each assignor class) are pure and live in
:mod:`kagent.core.assignors`; the aiokafka ``partition_assignment_strategy``
classes that run them inside real consumers live in :mod:`kagent.client.assignors`.
"""

from kagent.client.assignors import (
    FairPartitionAssignor,
    KagentPartitionAssignor,
    LagPartitionAssignor,
    LagStickyPartitionAssignor,
)
from kagent.core.assignors import *  # noqa: F403
from kagent.core.assignors import __all__ as _core_all

__all__ = [
    *_core_all,
    "FairPartitionAssignor",
    "KagentPartitionAssignor",
    "LagPartitionAssignor",
    "LagStickyPartitionAssignor",
]
