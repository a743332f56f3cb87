"""What an evaluation is asked to do: the lag unit, the skew metric and the trigger's thresholds.

Plain data, shared by the evaluation (:mod:`kagent.core.evaluation`), the
proposal it builds (:mod:`kagent.core.recommendation`) and the pipeline's
backtests. The worker builds its policy from its settings
(:attr:`kagent.settings.Settings.evaluation_policy`). Pure: no I/O.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import Enum

__all__ = ["EvaluationPolicy", "LagUnit", "SkewMetric"]


class LagUnit(str, Enum):
    """The unit a member's lag is added up in."""

    MESSAGES = "messages"
    SECONDS = "seconds"


class SkewMetric(str, Enum):
    """How unevenly lag is spread over a group's members (see ``kagent.core.skew``)."""

    PEAK_TO_MEAN = "peak-to-mean"
    COEFFICIENT_OF_VARIATION = "cv"
    GINI = "gini"
    RANGE = "range"
    """(max - min) / total."""


@dataclass(frozen=True)
class EvaluationPolicy:
    """The evaluation's settings (see :class:`kagent.settings.Settings` for each one's meaning)."""

    lag_unit: LagUnit
    skew_metric: SkewMetric
    skew_threshold: float
    min_total_lag: float
    min_improvement: float
    hold_evaluations: int
    hysteresis: float
    cooldown: float
    """Seconds."""
    strategy: str
    scale_headroom: float | None = 0.2
    """Capacity to spare above production when counting the members a group needs (0.2: 20 %); None
    turns ``scale`` recommendations off."""
    rate_window: float = 300.0
    """Seconds the production and consumption rates are measured over."""

    @property
    def rearm_below(self) -> float:
        """After a recommendation, the skew must fall below this before the group can trigger again."""
        return self.skew_threshold * self.hysteresis
