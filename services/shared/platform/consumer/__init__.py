"""The consumer: fetch -> verify -> apply one partition's records in one transaction -> commit.

A service's handlers get :class:`Delivery` objects per :class:`Subscription`; the
:class:`BatchProcessor` checks each record's position (its relay headers or its offset) and
signature, drops duplicates, applies a partition's fresh records with their tracking record in
ONE store transaction, commits the offsets after it (when idle, about once a second while
busy, and before a revoke); refused records go to the dead letters,
a handler failing on a service's message stops that partition until it passes.
"""

from services.shared.platform.consumer.dead_letters import dead_letter_for
from services.shared.platform.consumer.deliveries import (
    CREATE_TIME,
    LOG_APPEND_TIME,
    BatchHandler,
    Delivery,
    Refusal,
    Subscription,
    with_unit_of_work,
)
from services.shared.platform.consumer.intake import (
    MESSAGES_PER_NOTIFICATION,
    Headers,
    UntrustedHeaders,
    relayed_position,
)
from services.shared.platform.consumer.processor import BatchProcessor, RebalanceListener
