"""The services' eventsourcing mapper: line records typed, secret fields encrypted at rest.

A domain event field typed ``list[SomeLine]`` (a ``NamedTuple`` of
``services.shared.facts``) is stored as a JSON array of arrays, and eventsourcing's
``Mapper`` gives lists back. :class:`FactMapper` types them once, here, so the code that
reads an event (an aggregate replaying, the relay publishing) always sees line records,
live or replayed (a ``NamedTuple`` encodes as the array it was read from).

A fact that declares ``ENCRYPTED`` fields (the shoe's order and salt) is stored with those
fields null and their ciphertext in its ``encrypted`` field (``field_encryption.py``), bound
to the aggregate id and the fact's ``ENCRYPTION_BINDS``; read back, they are decrypted, so
the aggregate and the relay see the plain values and the store never holds them. A mapper
without ``secret_keys`` refuses to store such an event, and a row it cannot decrypt raises
:class:`~services.shared.platform.security.field_encryption.FieldDecryptionError`: never a shoe
rebuilt without its order. An event read from the store keeps the envelope it was stored
with, so storing it again gives the same bytes.
"""

from __future__ import annotations

from typing import Any
from uuid import UUID

from eventsourcing.domain import DomainEventProtocol
from eventsourcing.persistence import Mapper, StoredEvent

from services.shared.facts.base import LineRecord, line_fields
from services.shared.platform.security.field_encryption import (
    FieldDecryptionError,
    FieldEncryptionError,
    decrypt_fields,
    encrypt_fields,
)
from services.shared.platform.security.secret_keys import SecretKeys

_new_tuple = tuple.__new__
_LINES: dict[type, tuple[tuple[str, type[LineRecord]], ...]] = {}


def lines_of(cls: type) -> tuple[tuple[str, type[LineRecord]], ...]:
    """``cls``'s fields of line records (none for most events; worked out once per class)."""
    found = _LINES.get(cls)
    if found is None:
        try:
            found = line_fields(cls)
        except (NameError, TypeError):  # annotations only a type checker resolves: no lines
            found = ()
        _LINES[cls] = found
    return found


ENVELOPE = "encrypted"
"""The field that holds the ciphertext of a fact's ``ENCRYPTED`` fields."""


class FactMapper(Mapper[UUID]):
    """eventsourcing's ``Mapper``, then the line fields of the event's class typed and its
    encrypted fields decrypted (``secret_keys``: set by an Application whose facts have any)."""

    secret_keys: SecretKeys | None = None

    def to_stored_event(self, domain_event: DomainEventProtocol[UUID]) -> StoredEvent:
        secret: tuple[str, ...] = getattr(type(domain_event), "ENCRYPTED", ())
        if secret:
            domain_event = self._encrypted(domain_event, secret)
        return super().to_stored_event(domain_event)

    def _encrypted(
        self, event: DomainEventProtocol[UUID], secret: tuple[str, ...]
    ) -> DomainEventProtocol[UUID]:
        """A copy of ``event`` with its secret fields null and their ciphertext."""
        state: dict[str, Any] = dict(vars(event))
        envelope = state.get(ENVELOPE)
        if envelope is None:  # a new event (one read from the store keeps its ciphertext)
            if self.secret_keys is None:
                raise FieldEncryptionError(
                    f"{type(event).__qualname__}: no secret keys to encrypt "
                    f"{', '.join(secret)} with: refusing to store them in plain text"
                )
            values = {name: state[name] for name in secret}
            envelope = encrypt_fields(self.secret_keys, values, _binding(type(event), state))
        state.update(dict.fromkeys(secret), **{ENVELOPE: envelope})
        copy = object.__new__(type(event))
        object.__setattr__(copy, "__dict__", state)
        return copy

    def to_domain_event(self, stored_event: StoredEvent) -> DomainEventProtocol[UUID]:
        event = super().to_domain_event(stored_event)
        secret: tuple[str, ...] = getattr(type(event), "ENCRYPTED", ())
        if secret and event.__dict__.get(ENVELOPE) is not None:
            self._decrypt(event, secret, stored_event)
        typed = lines_of(type(event))
        if typed:
            state: dict[str, Any] = event.__dict__
            for name, record in typed:
                lines = state.get(name)
                if lines is not None:
                    # In place, each array freed as its record is made: the cheapest way
                    # measured (about 0.25 us a line; 10,000 lines for a busy coup).
                    for index, line in enumerate(lines):
                        lines[index] = _new_tuple(record, line)
        return event

    def _decrypt(
        self, event: DomainEventProtocol[UUID], secret: tuple[str, ...], stored: StoredEvent
    ) -> None:
        state: dict[str, Any] = event.__dict__
        where = f"{stored.topic} of {stored.originator_id} (version {stored.originator_version})"
        if any(state.get(name) is not None for name in secret):
            raise FieldDecryptionError(f"{where}: holds its secret fields in plain text too")
        if self.secret_keys is None:
            raise FieldDecryptionError(f"{where}: encrypted, and no secret keys to read it")
        values = decrypt_fields(
            self.secret_keys, state[ENVELOPE], _binding(type(event), state), where
        )
        if set(values) != set(secret):
            raise FieldDecryptionError(f"{where}: the ciphertext holds {sorted(values)}")
        state.update(values)


def _binding(cls: type, state: dict[str, Any]) -> dict[str, str]:
    """What the ciphertext of an event of ``cls`` is bound to: its aggregate and fields."""
    binding = {"aggregate_id": str(state["originator_id"])}
    for name in getattr(cls, "ENCRYPTION_BINDS", ()):
        binding[name] = str(state[name])
    return binding
