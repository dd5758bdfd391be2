"""What one provisioning run (``pg_roles.provision``) found, created and granted, and the
report ``punto-banco db setup`` prints of it (never a password)."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Literal

from services.shared.platform.store.pg_schemas import Grant, StoreRoles, StoreTables

RoleKind = Literal["owner", "service", "auditor"]


@dataclass
class RoleOutcome:
    name: str
    kind: RoleKind
    created: bool
    password: str | None = None  # only for a LOGIN role created now
    warnings: list[str] = field(default_factory=list)
    password_set: bool = False  # an existing LOGIN role given the password it must have


@dataclass
class StoreOutcome:
    roles: StoreRoles
    schema_created: bool
    tables: StoreTables
    grants: list[Grant]
    taken_over: list[str] = field(default_factory=list)  # objects another role owned


@dataclass
class Provisioning:
    """What one provisioning run found, created and granted."""

    database: str
    auditor: str
    roles: list[RoleOutcome]
    stores: list[StoreOutcome]
    shared_leases: list[StoreOutcome] = field(default_factory=list)  # partitioned: the lease
    # of each service's unpartitioned schema, which its partitioned processes share

    def describe(self) -> list[str]:
        """The report ``punto-banco db setup`` prints (never a password)."""
        lines = []
        for role in self.roles:
            state = "created" if role.created else "exists (password unchanged)"
            if role.password_set:
                state = "exists (password set to the one given)"
            if role.kind == "owner":
                state = "created" if role.created else "exists"
            lines.append(f"role {role.name} ({role.kind}): {state}")
            lines += [f"  warning: {warning}" for warning in role.warnings]
        for store in [*self.stores, *self.shared_leases]:
            tables = store.tables
            state = "created" if store.schema_created else "exists"
            lines.append(
                f"schema {self.database}.{store.roles.schema}: {state}, owner {store.roles.owner}"
                + (", the lease partitioned processes share" if store in self.shared_leases else "")
            )
            if store.taken_over:
                lines.append(
                    f"  taken over from their previous owner: {', '.join(store.taken_over)}"
                )
            for label, names in (
                ("events (append-only trigger)", tables.events),
                ("tracking", tables.tracking),
                ("snapshots", tables.snapshots),
                ("derived state (rebuildable from the events)", tables.side),
                ("writer lease (locked, never written)", tables.lease),
                ("other tables (auditor only)", tables.others),
            ):
                if names:
                    lines.append(f"  {label}: {', '.join(names)}")
            for grantee in (store.roles.login, self.auditor):
                given = [str(g) for g in store.grants if g.grantee == grantee]
                lines.append(f"  {grantee} may: {'; '.join(given)}")
        return lines
