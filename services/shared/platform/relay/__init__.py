"""The relay: a service's stored events -> signed, keyed Kafka records, in order, at least once.

The event store is the outbox: :class:`OutboxRelay` reads the notification log after the
position it recorded, turns each event into contract messages (the service's
:data:`EventMapper`, written with :func:`publish_one`, :func:`publish_lines` and :func:`one`),
signs and sends them with an idempotent producer, and records the new position once the
broker acknowledged them. Seals publish their anchors, incidents their ``IncidentRaised``.
"""

from services.shared.platform.relay.lines import Lines, line_ids, line_shape, publish_lines, wire
from services.shared.platform.relay.publishing import (
    anchor_message,
    attr,
    envelope,
    message_id,
    one,
    publish_one,
    shaped,
    with_anchors,
    with_incidents,
    without_seals,
)
from services.shared.platform.relay.records import SIGNED_TOPICS, EventMapper
from services.shared.platform.relay.relay import OutboxRelay
