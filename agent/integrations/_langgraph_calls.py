"""The LangGraph saver's arguments, checked and turned into payloads before anything is done.

Every saver method reads its arguments through here first, so a call LangGraph's types do not
allow (a config without a string ``thread_id``, a thread id no session can be named after, a
value the serializer cannot write, a payload no event can hold) is refused with a
:class:`~eventlog.ValidationError` before a session is opened, created or written: a refused
call leaves the store as it was.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    get_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from eventlog import ValidationError

from ._langgraph_events import Blob, Checkpointed, Typed, Write, WritesPut, session_id_for
from ._types import shown

__all__ = (
    "checked_channels",
    "checked_limit",
    "checked_thread",
    "checkpoint_payload",
    "configurable",
    "last_message",
    "thread_of",
    "writes_put",
)

_EMPTY = ("empty", b"")


def configurable(config: object, *, required: Sequence[str] = ()) -> Mapping[str, Any]:
    """The ``configurable`` mapping of a LangGraph config, its ``checkpoint_ns`` and
    ``checkpoint_id`` (when present) checked to be strings, and ``required`` keys present.

    :raises ValidationError: naming the key and what it holds.
    """
    inner = config.get("configurable") if isinstance(config, Mapping) else None
    if not isinstance(inner, Mapping):
        raise ValidationError(
            f"Expected a config with a `configurable` mapping, got `{type(config).__name__}` "
            f"({shown(config)})"
        )
    for key in ("checkpoint_ns", "checkpoint_id", *required):
        value = inner.get(key)
        # Optional: a missing namespace (the root, ""), a missing or None checkpoint id.
        absent = key not in required and (key not in inner or key == "checkpoint_id")
        if not isinstance(value, str) and not (absent and value is None):
            raise ValidationError(
                f"Expected `str`, got `{type(value).__name__}` ({shown(value)}) - at "
                f"`configurable.{key}` of the config"
            )
    return inner


def checked_thread(thread_id: object) -> str:
    """``thread_id`` when a session can be named after it (:func:`session_id_for`).

    :raises ValidationError: it is not a string, or holds a lone surrogate.
    """
    session_id_for(thread_id)
    assert isinstance(thread_id, str)
    return thread_id


def thread_of(config: object, *, required: Sequence[str] = ()) -> str:
    """The config's thread id, checked (and the rest of its ``configurable``, see
    :func:`configurable`).

    :raises ValidationError: the config does not name a thread a session can be named after.
    """
    return checked_thread(configurable(config, required=("thread_id", *required))["thread_id"])


def _dumps(serde: SerializerProtocol, value: Any, where: str) -> Typed:
    try:
        return Typed.of(serde.dumps_typed(value))
    except Exception as exc:  # whatever the serializer raises (TypeError, ValueError, ...)
        raise ValidationError(
            f"the saver's serializer cannot write {where} ({type(exc).__name__}: {shown(str(exc))})"
        ) from exc


def checkpoint_payload(
    serde: SerializerProtocol,
    config: Mapping[str, Any],
    checkpoint: Checkpoint,
    metadata: CheckpointMetadata,
    new_versions: ChannelVersions,
) -> Checkpointed:
    """The ``langgraph/checkpoint`` payload of one ``put``.

    :raises ValidationError: the checkpoint has no string ``id``, ``new_versions`` is not a
        mapping, or the serializer cannot write a part of it.
    """
    inner = configurable(config)
    if not isinstance(checkpoint, Mapping) or not isinstance(checkpoint.get("id"), str):
        raise ValidationError(
            f"Expected a checkpoint with a `str` id, got {shown(checkpoint)} - at `checkpoint`"
        )
    if not isinstance(new_versions, Mapping):
        raise ValidationError(
            f"Expected a mapping, got `{type(new_versions).__name__}` - at `new_versions`"
        )
    rest = dict(checkpoint)
    values = rest.pop("channel_values", {})
    if not isinstance(values, Mapping):
        raise ValidationError(
            f"Expected a mapping, got `{type(values).__name__}` - at `checkpoint.channel_values`"
        )
    try:
        merged = get_checkpoint_metadata(config, metadata)  # type: ignore[arg-type]
    except Exception as exc:
        raise ValidationError(f"the checkpoint metadata cannot be merged: {exc!r}") from exc
    return Checkpointed(
        ns=inner.get("checkpoint_ns", ""),
        id=checkpoint["id"],
        parent=inner.get("checkpoint_id"),
        checkpoint=_dumps(serde, rest, "the checkpoint"),
        metadata=_dumps(serde, merged, "the checkpoint metadata"),
        blobs=[
            Blob(
                channel=channel,
                version=version,
                value=_dumps(serde, values[channel], f"channel {shown(channel)}")
                if channel in values
                else Typed.of(_EMPTY),
            )
            for channel, version in new_versions.items()
        ],
    )


def writes_put(
    serde: SerializerProtocol,
    config: Mapping[str, Any],
    writes: object,
    task_id: object,
    task_path: object,
) -> WritesPut:
    """The ``langgraph/writes`` payload of one ``put_writes`` with every write of the call
    (the saver logs only those it keeps: a subset).

    :raises ValidationError: the config names no checkpoint, a task id or path is not a
        string, or a write is refused (see :func:`_write_list`).
    """
    inner = configurable(config, required=("checkpoint_id",))
    if not isinstance(task_id, str) or not isinstance(task_path, str):
        raise ValidationError(
            f"Expected `str` task_id and task_path, got `{type(task_id).__name__}` and "
            f"`{type(task_path).__name__}`"
        )
    return WritesPut(
        ns=inner.get("checkpoint_ns", ""),
        checkpoint_id=inner["checkpoint_id"],
        task_id=task_id,
        task_path=task_path,
        writes=_write_list(serde, writes),
    )


def _write_list(serde: SerializerProtocol, writes: object) -> list[Write]:
    """The writes of one ``put_writes``, serialized, with their indices.

    :raises ValidationError: ``writes`` is not a sequence of ``(channel, value)`` pairs with a
        string channel, or the serializer cannot write a value.
    """
    if not isinstance(writes, Sequence) or isinstance(writes, str | bytes):
        raise ValidationError(f"Expected a sequence of (channel, value) pairs, got {shown(writes)}")
    found: list[Write] = []
    for idx, pair in enumerate(writes):
        if not (isinstance(pair, Sequence) and len(pair) == 2 and isinstance(pair[0], str)):
            raise ValidationError(
                f"Expected a (channel, value) pair with a `str` channel, got {shown(pair)} - "
                f"at `writes[{idx}]`"
            )
        channel, value = pair
        value_typed = _dumps(serde, value, f"the value of `writes[{idx}]`")
        found.append(
            Write(idx=WRITES_IDX_MAP.get(channel, idx), channel=channel, value=value_typed)
        )
    return found


def checked_limit(limit: object) -> int | None:
    """``list``'s ``limit``: ``None`` or an int.

    :raises ValidationError: anything else.
    """
    if limit is not None and type(limit) is not int:
        raise ValidationError(f"Expected `int` or None, got {shown(limit)} - at `limit`")
    return limit


def checked_channels(channels: object) -> Sequence[str]:
    """``get_delta_channel_history``'s ``channels``: a sequence of channel names.

    :raises ValidationError: anything else (a bare string included: it is one name, not many).
    """
    if (
        not isinstance(channels, Sequence)
        or isinstance(channels, str)
        or not all(isinstance(channel, str) for channel in channels)
    ):
        raise ValidationError(
            f"Expected a sequence of `str` channel names, got {shown(channels)} - at `channels`"
        )
    return channels


def last_message(checkpoint: Checkpoint) -> Any:
    """The latest entry of the checkpoint's ``messages`` channel (LangGraph's message-state
    convention), or ``None``."""
    values = checkpoint.get("channel_values") if isinstance(checkpoint, Mapping) else None
    messages = values.get("messages") if isinstance(values, Mapping) else None
    return messages[-1] if isinstance(messages, list) and messages else None
