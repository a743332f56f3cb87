"""Public import path of the embedded broker (Tansu): it lives in :mod:`kagent.tools.embedded`."""

from kagent.tools.embedded import *  # noqa: F403
from kagent.tools.embedded import __all__ as __all__
