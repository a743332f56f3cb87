"""`kagent simulate`: skewed keyed traffic and real consumer groups on a cluster.

A `Scenario` (data) names topics, keyed traffic with Zipf-skewed keys placed
by murmur2 as Java clients place them, and consumer groups (range or
round-robin, some members slower) that commit what they process.
`run_simulation` runs it. Because the embedded broker keeps no
`__consumer_offsets`, the simulator can also append the records Kafka's
group coordinator would write there, in Kafka's binary format.

Pure parts: `scenario`, `placement`, `keys`, `rebalance`,
`coordinator_records`. I/O shell: `traffic`, `member`, `group`,
`publisher`, `runner`, `cli`.
"""

from kagent.tools.simulator.runner import run_simulation
from kagent.tools.simulator.scenario import (
    GroupSpec,
    MemberSpec,
    Scenario,
    ScenarioError,
    TopicSpec,
    TrafficSpec,
    default_scenario,
)
from kagent.tools.simulator.status import GroupRebalanced, OffsetsCommitted, SimulationEvent, StatusCallback

__all__ = [
    "GroupRebalanced",
    "GroupSpec",
    "MemberSpec",
    "OffsetsCommitted",
    "Scenario",
    "ScenarioError",
    "SimulationEvent",
    "StatusCallback",
    "TopicSpec",
    "TrafficSpec",
    "default_scenario",
    "run_simulation",
]
