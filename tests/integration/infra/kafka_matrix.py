"""The broker's ACL matrix written out by hand (from the issue), for the tests to hold the
derived one and the broker's behaviour to."""

from __future__ import annotations

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    BOOK_EVENTS,
    COMMAND_EVENTS,
    DEAD_LETTERS,
    INCIDENTS,
    SEALS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    STUDIO_READS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    TOPIC_MESSAGES,
)

EVERY_TOPIC = frozenset(TOPIC_MESSAGES)

WRITES: dict[str, frozenset[str]] = {
    "shoe": frozenset({SHOE_EVENTS, DEAD_LETTERS, INCIDENTS, SEALS}),
    "dealing": frozenset(
        {TABLE_EVENTS, COMMAND_EVENTS, SHOE_COMMANDS, BET_COMMANDS, DEAD_LETTERS, INCIDENTS, SEALS}
    ),
    "settlement": frozenset({BET_EVENTS, BOOK_EVENTS, DEAD_LETTERS, INCIDENTS, SEALS}),
    "gateway": frozenset({BET_COMMANDS, DEAD_LETTERS, INCIDENTS, SEALS}),  # a service now
    "studio-bridge": frozenset({STUDIO_READS, DEAD_LETTERS, INCIDENTS, SEALS}),
    "operator": frozenset({TABLE_COMMANDS}),
    "supervisor": frozenset({TABLE_COMMANDS}),
    "auditor": frozenset(),
    "dashboard": frozenset(),
}
"""Who may write which topic: written out by hand, from the issue (each service its seal
anchors too, on the one seals topic: its signature, not the broker, names the service)."""

READS: dict[str, frozenset[str]] = {
    "shoe": frozenset({SHOE_COMMANDS, STUDIO_READS}),  # the studio reads: not consumed yet
    "dealing": frozenset({TABLE_COMMANDS, SHOE_EVENTS, BOOK_EVENTS}),
    "settlement": frozenset({BET_COMMANDS, TABLE_EVENTS, SHOE_EVENTS}),
    "gateway": frozenset({BET_EVENTS, TABLE_EVENTS}),
    "studio-bridge": frozenset(),
    "operator": frozenset({TABLE_EVENTS, COMMAND_EVENTS}),
    "supervisor": frozenset({TABLE_EVENTS, COMMAND_EVENTS}),
    "auditor": EVERY_TOPIC,
    "dashboard": EVERY_TOPIC,
}
"""Who may read which topic: written out by hand, from the issue."""
