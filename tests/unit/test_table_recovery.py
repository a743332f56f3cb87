"""kagent's table recovery answers need_recovery exactly as Faust's does, after every change of the
offsets and highwaters (kagent.worker.table_recovery)."""

from __future__ import annotations

import faust
from faust.tables.recovery import Recovery as FaustRecovery
from faust.types import TP
from hypothesis import given, settings
from hypothesis import strategies as st

from kagent.worker.table_recovery import Recovery, TableManager

PARTITIONS = [TP(f"app-{table}-changelog", partition) for table in ("committed", "windows") for partition in range(3)]

APP = faust.App("recovery-test", broker="kafka://localhost:1", TableManager=TableManager)

changes = st.lists(
    st.tuples(
        st.sampled_from(["offset", "highwater", "forget"]),
        st.sampled_from(PARTITIONS),
        st.one_of(st.none(), st.integers(min_value=-1, max_value=6)),
    ),
    max_size=40,
)


def recovery() -> Recovery:
    made = Recovery(APP, APP.tables)
    made.active_highwaters.clear()
    made.active_offsets.clear()
    return made


def test_the_app_recovers_with_kagents_recovery() -> None:
    assert isinstance(APP.tables.recovery, Recovery)


@settings(max_examples=300)
@given(changes)
def test_need_recovery_is_faust_s_answer_after_every_change(steps: list[tuple[str, TP, int | None]]) -> None:
    made = recovery()
    for what, tp, value in steps:
        if what == "offset":
            made.active_offsets[tp] = value
        elif what == "highwater":
            made.active_highwaters[tp] = value
        else:
            made.active_highwaters.pop(tp, None)
            made.active_offsets.pop(tp, None)
        assert made.need_recovery() == FaustRecovery.need_recovery(made), (what, tp, value)


def test_a_recovery_is_over_once_every_partition_reaches_its_highwater() -> None:
    made = recovery()
    for tp in PARTITIONS:
        made.active_highwaters[tp] = 5
        made.active_offsets[tp] = -1
    for offset in range(6):
        for tp in PARTITIONS:
            assert made.need_recovery()
            made.active_offsets[tp] = offset
    assert not made.need_recovery()
