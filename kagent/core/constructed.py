"""Models of values already valid, made at a fraction of ``model_construct``'s cost.

An evaluation makes a :class:`~kagent.core.snapshot.PartitionLag` of every partition its group reads and a
:class:`~kagent.core.group_health.CommitWindow` of every commit window it judges, from figures kagent
computed or wrote itself: nothing to validate. pydantic's ``model_construct`` skips validation but still
looks up each field's aliases and default (4.7 µs a ``PartitionLag``); :func:`constructed` lays the
values in as the instance's fields directly (1.5 µs), for models whose fields have no alias and that have
no ``model_post_init`` and no extra fields kept, given every field. The instance is the one
``model_construct(**values)`` makes: equal, the same dump, hash and fields set
(``tests/unit/test_constructed.py``).

Pure.
"""

from __future__ import annotations

from typing import Any, TypeVar

from pydantic import BaseModel

__all__ = ["constructed"]

M = TypeVar("M", bound=BaseModel)

_FIELDS: dict[type[BaseModel], frozenset[str]] = {}
"""Each model made here -> its fields' names (checked once that the model can be made this way)."""

_set = object.__setattr__


def constructed(model: type[M], values: dict[str, Any]) -> M:
    """``model.model_construct(**values)``, for ``values`` holding every field of ``model`` and nothing else,
    in the order the model declares them, each already valid (nothing is checked but the names). The dict
    becomes the instance's own: the caller must not change it afterwards. Raises ``ValueError`` naming the
    fields missing or unknown, and ``TypeError`` for a model that cannot be made this way (a field with an
    alias, a ``model_post_init``, extra fields kept, a root model)."""
    fields = _FIELDS.get(model)
    if fields is None:
        fields = _FIELDS[model] = _fields_of(model)
    if values.keys() != fields:
        missing, unknown = sorted(fields - values.keys()), sorted(values.keys() - fields)
        raise ValueError(f"{model.__name__} is made of every one of its fields: missing {missing}, unknown {unknown}")
    made = model.__new__(model)
    _set(made, "__dict__", values)
    _set(made, "__pydantic_fields_set__", set(fields))
    _set(made, "__pydantic_extra__", None)
    _set(made, "__pydantic_private__", None)
    return made


def _fields_of(model: type[BaseModel]) -> frozenset[str]:
    """The names of ``model``'s fields, once it is known that ``model_construct`` makes it with no more than
    what :func:`constructed` does."""
    if (
        model.__pydantic_root_model__
        or model.__pydantic_post_init__
        or model.model_config.get("extra") == "allow"
        or any(f.alias is not None or f.validation_alias is not None for f in model.__pydantic_fields__.values())
    ):
        raise TypeError(f"{model.__name__} cannot be constructed without model_construct's own steps")
    return frozenset(model.__pydantic_fields__)
