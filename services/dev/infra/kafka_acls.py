"""Who may do what on the project's topics: the broker's ACL matrix, derived from contracts.

The broker denies by default (StandardAuthorizer, ``allow.everyone.if.no.acl.found=false``);
these ALLOW bindings are all a principal gets:

- a service (shoe, dealing, settlement) WRITEs the topics of the messages it is the source
  of (``contracts.MESSAGE_SOURCES``: its own event topics, and for dealing ``shoe-commands``
  and its OpenBook / CloseBook marks on ``bet-commands``), plus dead letters, incidents and
  its seal anchors on ``seals`` (one topic for the three: the audit counts an anchor only
  when signed by the service its key names),
  and READs the topics it consumes (:data:`SERVICE_READS`, the topics of its subscriptions:
  a test holds the two equal);
- ``gateway`` WRITEs what PlaceBet travels on (``bet-commands``) and, as the gateway service
  on the platform, dead letters, incidents and its seal anchors (signed: the audit checks them);
  it READs bet-events and table-events (the tables' public facts), nothing else: not
  book-events (every operator's stakes), shoe-events (the burned cards), command-events (the
  house's refused commands) nor the house's alarms; ``operator`` WRITEs the topic of OpenTable,
  CloseTable and CloseBetting, ``supervisor`` the one of VoidCoup (both ``table-commands``),
  and both READ table-events and command-events (dealing's answers to table commands);
- ``auditor`` and ``dashboard`` READ every project topic and write nothing.

Every gateway principal also has a quota (:data:`GATEWAY_QUOTA`: bytes per second and a
share of the broker's threads), so that one operator's flood cannot outrun settlement, which
reads every operator's bets and closes a coup's book only once it has read every operator's
CloseBook.

Every principal that reads may use the consumer group ``<group prefix>punto-banco-<name>``
(what ``Settings.consumer_group`` names a service's group) and groups below it
(``...punto-banco-<name>.<anything>``); no other group. WRITE and READ imply DESCRIBE on the
topic, and WRITE on any topic implies IDEMPOTENT_WRITE (KIP-679), which idempotent producers
need. Nobody but the admin creates, deletes or alters topics, configs or ACLs.

A principal's role comes from its exact name (:func:`role_of`: a role's own name, or
``gateway-<operator>`` for an operator the deployment serves) or is given explicitly
(``punto-banco infra credentials floor-2 --add --role operator``); never from a part of its
name, so ``operator-acme`` is nobody until someone gives it a role, and no ``gateway-house``
shares the house's topics.

Operators (B2B, ``PB_OPERATORS``): each operator has its own bet-commands and bet-events
topics (``contracts.topics``; the house keeps the unsuffixed ones). A gateway principal is one
operator's: ``gateway`` the house's, ``gateway-<operator>`` that operator's; it WRITEs only its
operator's bet-commands topic and READs only its operator's bet-events topic (and
table-events): a bet's operator is the topic it came by, so no gateway can place bets for
another operator or read another operator's answers. Dealing WRITEs its marks to every
operator's bet-commands topic; settlement READs every operator's bet-commands topic and
WRITEs every operator's bet-events topic; auditor and dashboard READ them all
(:func:`role_for`: the matrix above, per deployment).
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from types import MappingProxyType

from contracts import (
    BET_COMMANDS,
    BET_EVENTS,
    BOOK_EVENTS,
    COMMAND_EVENTS,
    DEAD_LETTERS,
    HOUSE,
    INCIDENTS,
    MESSAGE_SOURCES,
    MESSAGE_TOPICS,
    SEALS,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    STUDIO_READS,
    TABLE_COMMANDS,
    TABLE_EVENTS,
    TOPIC_MESSAGES,
    base_topic,
    bet_commands_topic,
    bet_events_topic,
    check_operator,
    operator_topics,
    topic_operator,
)
from services.dev.infra.kafka_admin import (
    AclBinding,
    AclOperation,
    AdminSession,
    PatternType,
    ResourceType,
    acl_filter,
    create_topics,
)
from services.shared.platform.settings import KafkaAuth

SERVICE_READS: Mapping[str, tuple[str, ...]] = MappingProxyType(
    {
        "shoe": (SHOE_COMMANDS, STUDIO_READS),
        "dealing": (TABLE_COMMANDS, SHOE_EVENTS, BOOK_EVENTS),
        "settlement": (BET_COMMANDS, TABLE_EVENTS, SHOE_EVENTS),
    }
)
"""Service -> the topics its consumer subscribes to."""


@dataclass(frozen=True)
class Role:
    """The logical topics a principal may write and read."""

    writes: tuple[str, ...]
    reads: tuple[str, ...]


def _sends(*message_types: str) -> tuple[str, ...]:
    return tuple(sorted({MESSAGE_TOPICS[name] for name in message_types}))


def _service_role(service: str) -> Role:
    own = [name for name, source in MESSAGE_SOURCES.items() if source == service]
    return Role(
        writes=tuple(sorted({*_sends(*own), DEAD_LETTERS, INCIDENTS, SEALS})),
        reads=tuple(sorted(SERVICE_READS[service])),
    )


_EVERY_TOPIC = tuple(sorted(TOPIC_MESSAGES))

ROLES: Mapping[str, Role] = MappingProxyType(
    {
        **{service: _service_role(service) for service in SERVICE_READS},
        "gateway": Role(
            writes=tuple(sorted({*_sends("PlaceBet"), DEAD_LETTERS, INCIDENTS, SEALS})),
            reads=(BET_EVENTS, TABLE_EVENTS),
        ),
        # The device bridge of a studio table: it publishes its reads and consumes nothing.
        "studio-bridge": Role(
            writes=tuple(sorted({*_sends("StudioRead"), DEAD_LETTERS, INCIDENTS, SEALS})),
            reads=(),
        ),
        "operator": Role(
            writes=_sends("OpenTable", "CloseTable", "CloseBetting"),
            reads=(COMMAND_EVENTS, TABLE_EVENTS),
        ),
        "supervisor": Role(writes=_sends("VoidCoup"), reads=(COMMAND_EVENTS, TABLE_EVENTS)),
        "auditor": Role(writes=(), reads=_EVERY_TOPIC),
        "dashboard": Role(writes=(), reads=_EVERY_TOPIC),
    }
)
"""Role name -> what it may do; each role is also a principal of the same name."""

PRINCIPALS: tuple[str, ...] = tuple(ROLES)


@dataclass(frozen=True)
class Quota:
    """How much of the broker one principal may take (Kafka's client quotas per user, summed
    over all its connections): the broker delays its answers to a principal above them."""

    producer_byte_rate: int
    """Bytes per second it may produce."""
    request_percentage: int
    """Percent of one broker thread's time (request handling and network) it may use."""

    def config(self) -> dict[str, float | None]:
        """The quota keys and values, a 0 as None (no quota of that kind)."""
        return {
            "producer_byte_rate": float(self.producer_byte_rate) or None,
            "request_percentage": float(self.request_percentage) or None,
        }


GATEWAY_QUOTA = Quota(producer_byte_rate=1024 * 1024, request_percentage=50)
"""Every gateway principal's quota by default: 1 MiB/s is about 3,000 PlaceBet/s (about 340
bytes on the wire each: a 10,000-bet coup's bets in 3.5 s), about what one settlement process
settles on a 2-core machine; half a broker thread. Size it to your settlement's capacity shared
by the gateways (docs/scaling.md, "One operator's flood")."""


def role_quota(role: str, gateway: Quota = GATEWAY_QUOTA) -> Quota | None:
    """The quota of a principal acting in ``role``: the gateways' (the bettors' traffic, from
    outside), else none (the services and the house's tools)."""
    return gateway if role == "gateway" else None


def project_quotas(
    principals: Mapping[str, str], gateway: Quota = GATEWAY_QUOTA
) -> dict[str, dict[str, float | None]]:
    """Per principal with a quota (``principals``: name -> role), its quota keys."""
    return {
        name: quota.config()
        for name, role in principals.items()
        if (quota := role_quota(role, gateway)) is not None
    }


def role_of(principal: str, operators: Iterable[str] = (HOUSE,)) -> str | None:
    """The role of a principal known by its exact name in a deployment serving ``operators``
    (:func:`project_principals`), else None: a name is never read in parts."""
    return project_principals(operators).get(principal)


def gateway_operator(principal: str) -> str:
    """The operator a gateway principal serves: ``gateway`` the house, ``gateway-<op>`` op
    (another operator than the house: the house's gateway is ``gateway`` alone)."""
    if principal == "gateway":
        return HOUSE
    operator = principal.removeprefix("gateway-")
    with contextlib.suppress(ValueError):
        if operator not in (principal, HOUSE) and check_operator(operator):
            return operator
    raise ValueError(
        f"a gateway principal is gateway (the house's) or gateway-<operator> for another "
        f"operator, not {principal!r}"
    )


def _each_operator(topics: Iterable[str], operators: Iterable[str]) -> tuple[str, ...]:
    """``topics`` with each operator topic (bet-commands, bet-events) as every operator's."""
    chosen = tuple(operators)
    found: set[str] = set()
    for topic in topics:
        if topic_operator(topic) is None:
            found.add(topic)
        else:
            found.update(t for t in operator_topics(chosen) if base_topic(t) == topic)
    return tuple(sorted(found))


def role_for(principal: str, role: str, operators: Iterable[str] = (HOUSE,)) -> Role:
    """What ``principal`` acting in ``role`` may do in a deployment serving ``operators``:
    a gateway its operator's topics only (:func:`gateway_operator`), any other role the
    matrix with the operator topics as every operator's."""
    if role == "gateway":
        operator = gateway_operator(principal)
        return Role(
            writes=tuple(sorted({bet_commands_topic(operator), DEAD_LETTERS, INCIDENTS, SEALS})),
            reads=tuple(sorted({bet_events_topic(operator), TABLE_EVENTS})),
        )
    allowed = ROLES[role]
    return Role(_each_operator(allowed.writes, operators), _each_operator(allowed.reads, operators))


def consumer_group(principal: str, group_prefix: str = "") -> str:
    """The consumer group a principal may use (and ``<it>.<anything>``)."""
    return f"{group_prefix}punto-banco-{principal}"


def principal_acls(
    principal: str,
    role: str,
    topic_prefix: str = "",
    group_prefix: str = "",
    operators: Iterable[str] = (HOUSE,),
) -> list[AclBinding]:
    """The ALLOW bindings of one principal acting in ``role`` (:func:`role_for`)."""
    user = f"User:{principal}"
    allowed = role_for(principal, role, operators)
    bindings = [
        AclBinding(ResourceType.TOPIC, topic_prefix + topic, PatternType.LITERAL, user, operation)
        for operation, topics in (
            (AclOperation.WRITE, allowed.writes),
            (AclOperation.READ, allowed.reads),
        )
        for topic in topics
    ]
    if allowed.reads:
        group = consumer_group(principal, group_prefix)
        bindings += [
            AclBinding(ResourceType.GROUP, group, PatternType.LITERAL, user, AclOperation.READ),
            AclBinding(
                ResourceType.GROUP, group + ".", PatternType.PREFIXED, user, AclOperation.READ
            ),
        ]
    return bindings


def project_principals(operators: Iterable[str] = (HOUSE,)) -> dict[str, str]:
    """Every role as itself, and ``gateway-<operator>`` for each operator but the house."""
    gateways = {f"gateway-{op}": "gateway" for op in operators if op != HOUSE}
    return {**{name: name for name in ROLES}, **gateways}


def project_acls(
    topic_prefix: str = "",
    group_prefix: str = "",
    principals: Mapping[str, str] | None = None,
    operators: Iterable[str] = (HOUSE,),
) -> list[AclBinding]:
    """The whole matrix: ``principals`` (name -> role; default :func:`project_principals`)."""
    served = tuple(operators)
    chosen = principals if principals is not None else project_principals(served)
    return [
        binding
        for name, role in chosen.items()
        for binding in principal_acls(name, role, topic_prefix, group_prefix, served)
    ]


async def ensure_project_topics(
    bootstrap: str,
    admin: KafkaAuth,
    topic_prefix: str = "",
    partitions: int = 3,
    operators: Iterable[str] = (HOUSE,),
) -> list[str]:
    """As the admin, create the project topics named ``<topic_prefix><topic>`` that are
    missing (every operator's own too), with their configs (``TOPIC_CONFIGS``: LogAppendTime
    on the bet-commands topics and shoe-events); returns the names created."""
    from services.shared.platform.kafka import PROJECT_TOPICS, topic_config

    topics = list(dict.fromkeys((*PROJECT_TOPICS, *operator_topics(operators))))
    return await create_topics(
        bootstrap,
        admin,
        [topic_prefix + topic for topic in topics],
        {topic_prefix + t: topic_config(t) for t in topics if topic_config(t)},
        partitions,
    )


async def grant_project_acls(
    bootstrap: str,
    admin: KafkaAuth,
    topic_prefix: str = "",
    group_prefix: str = "",
    principals: Mapping[str, str] | None = None,
    operators: Iterable[str] = (HOUSE,),
) -> list[AclBinding]:
    """Grant the matrix for topics named ``<topic_prefix><topic>`` and consumer groups under
    ``group_prefix`` (tests and the bench use a per-run prefix for both); idempotent.
    Returns the bindings granted."""
    bindings = project_acls(topic_prefix, group_prefix, principals, operators)
    async with AdminSession(bootstrap, admin) as session:
        await session.create_acls(bindings)
    return bindings


async def revoke_project_acls(
    bootstrap: str,
    admin: KafkaAuth,
    topic_prefix: str = "",
    group_prefix: str = "",
    principals: Mapping[str, str] | None = None,
    operators: Iterable[str] = (HOUSE,),
) -> int:
    """Delete the bindings :func:`grant_project_acls` made (a run's clean-up); how many."""
    bindings = project_acls(topic_prefix, group_prefix, principals, operators)
    filters = list(
        dict.fromkeys(  # one filter per resource pattern and principal
            acl_filter(
                resource_type=binding.resource_type,
                name=binding.name,
                pattern=binding.pattern,
                principal=binding.principal,
            )
            for binding in bindings
        )
    )
    async with AdminSession(bootstrap, admin) as session:
        return await session.delete_acls(filters)
