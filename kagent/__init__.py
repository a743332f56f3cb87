"""kagent: measures consumer lag per group member, detects skew, recommends rebalances."""

__version__ = "0.1.0"
