"""The bridge's stored events -> ``StudioRead``, one per read or gap, keyed by table id."""

from __future__ import annotations

from functools import singledispatch

from contracts import Message, StudioRead
from services.shared.platform.relay import one
from services.studio_bridge.domain import DeviceReads


@singledispatch
def to_messages(event: object) -> list[Message]:
    """The contract messages to publish for one stored domain event (often none)."""
    return []


to_messages.register(DeviceReads.Read, one(StudioRead))
