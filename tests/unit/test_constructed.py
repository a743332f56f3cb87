"""Models made of values already valid (:func:`kagent.core.constructed.constructed`): the instance
``model_construct`` makes, for the models an evaluation makes one of per partition."""

from __future__ import annotations

import pickle

import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel, ConfigDict, Field

from kagent.core.constructed import constructed
from kagent.core.group_health import CommitObservation, CommitWindow
from kagent.core.snapshot import LagFlag, PartitionLag

FIGURES = st.one_of(st.none(), st.integers(0, 2**63 - 1))


@given(
    st.text(max_size=5),
    st.integers(0, 100),
    FIGURES,
    FIGURES,
    st.one_of(st.none(), st.floats(0, 1e6)),
    st.lists(st.sampled_from(list(LagFlag)), max_size=2).map(tuple),
)
def test_a_partition_lag_is_the_one_model_construct_makes(
    group: str, partition: int, committed: int | None, lag: int | None, time_lag: float | None, flags: tuple[LagFlag]
) -> None:
    values = {
        "group": group,
        "topic": "orders",
        "partition": partition,
        "committed": committed,
        "log_start": 0,
        "log_end": None if committed is None else committed + (lag or 0),
        "offset_lag": lag,
        "estimated_lag": None,
        "time_lag": time_lag,
        "flags": flags,
        "polled_at": 1.5,
    }
    expected = PartitionLag.model_construct(**values)

    made = constructed(PartitionLag, dict(values))

    assert type(made) is PartitionLag
    assert made == expected
    assert repr(made) == repr(expected)
    assert made.model_dump_json() == expected.model_dump_json()
    assert made.model_fields_set == expected.model_fields_set
    assert hash(made) == hash(expected)  # frozen: hashable alike
    assert pickle.loads(pickle.dumps(made)) == expected
    with pytest.raises(ValueError, match="frozen"):
        made.offset_lag = 3  # type: ignore[misc]


def test_a_commit_window_is_the_one_model_construct_makes() -> None:
    commits = (CommitObservation(5, 1.0, 9), CommitObservation(7, 2.0, None))
    values = {"capacity": 10, "min_distance": 1.0, "commits": commits}

    made = constructed(CommitWindow, dict(values))

    assert made == CommitWindow.model_construct(**values) == CommitWindow(**values)
    assert made.model_dump_json() == CommitWindow(**values).model_dump_json()


def test_every_field_must_be_given_and_no_other() -> None:
    with pytest.raises(ValueError, match=r"CommitWindow .* missing \['min_distance'\], unknown \['size'\]"):
        constructed(CommitWindow, {"capacity": 10, "size": 3, "commits": ()})


class _Aliased(BaseModel):
    name: str = Field(alias="Name")


class _Extra(BaseModel):
    model_config = ConfigDict(extra="allow")

    name: str


class _PostInit(BaseModel):
    name: str

    def model_post_init(self, context: object) -> None:
        pass


@pytest.mark.parametrize("model", [_Aliased, _Extra, _PostInit])
def test_a_model_with_steps_of_model_constructs_own_is_refused(model: type[BaseModel]) -> None:
    with pytest.raises(TypeError, match=model.__name__):
        constructed(model, {"name": "x"})
