"""Public import path of the ``__consumer_offsets`` codec: decode, encode and the record classes.

The codec lives in :mod:`kagent.core.consumer_offsets`; this module re-exports
its public names so that ``from kagent.consumer_offsets import decode`` keeps working.
"""

from kagent.core.consumer_offsets import *  # noqa: F403
from kagent.core.consumer_offsets import __all__ as __all__
