"""Drive the three real Applications in one process, to make histories to audit.

Used by the audit's tests and its benchmark, never by the auditor itself (which
only reads stores). :class:`LocalSystem` stands in for Kafka: it relays each
Application's notification log (through the service's own ``to_messages``) to
the Applications that consume the topic, with the same tracking names and
positions the platform consumer uses. :func:`play` runs tables through whole
shoes with many bets, voids and refused bets; its voids are signed by the system's
supervisor (:data:`SUPERVISOR`, a key made for the system, or the data folder's).

Operators (B2B): settlement's ``PB_OPERATORS`` names the operators; dealing's marks reach
settlement once per operator (as on each operator's bet-commands topic) and
:meth:`LocalSystem.place_bets` places bets for one operator (``play(operators=...)``: the
same bets, same ids, for each).
"""

from __future__ import annotations

import random
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from uuid import uuid4

from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
from eventsourcing.persistence import Tracking

from contracts import (
    BET_COMMANDS,
    BOOK_EVENTS,
    HOUSE,
    SHOE_COMMANDS,
    SHOE_EVENTS,
    TABLE_EVENTS,
    BetLimitSpec,
    BetsClosed,
    CardDrawn,
    CloseBetting,
    CloseTable,
    Message,
    OpenTable,
    PlaceBet,
    VoidCoup,
    bet_commands_topic,
    topic_for,
)
from services.dealing.application import DealingApplication
from services.dealing.messages import to_messages as dealing_messages
from services.settlement.application import SettlementApplication
from services.settlement.messages import to_messages as settlement_messages
from services.shared.facts.settlement import BookClosedFact
from services.shared.platform.relay import without_seals
from services.shared.platform.security import (
    SecretKeys,
    SupervisorKey,
    SupervisorKeyring,
)
from services.shared.platform.settings import Settings
from services.shared.platform.store import ServiceApplication, prepare_store, seal_store
from services.shoe.application import ShoeApplication
from services.shoe.messages import apply_command
from services.shoe.messages import to_messages as shoe_messages
from services.tools.admin.keys import (
    env_form,
    init_secret_key,
    new_key,
    next_kid,
)
from services.tools.admin.supervisors import (
    SupervisorSigner,
    ensure_supervisor_key,
)

SERVICES = ("shoe", "dealing", "settlement")
POSITION_FACTOR = 2**20
BOOK_CLOSED = BookClosedFact.STORED_TOPIC
"""Stored topic of settlement's event that is published as BetsClosed (dealing deals on it)."""

LIMITS: dict[str, tuple[int, int]] = {
    "player": (100, 1_000_000),
    "banker": (100, 1_000_000),
    "tie": (100, 100_000),
    "player_pair": (100, 50_000),
    "banker_pair": (100, 50_000),
}
BET_TYPES = tuple(LIMITS)
SIDE_LIMITS: dict[str, tuple[int, int]] = {
    "either_pair": (100, 50_000),
    "perfect_pair": (100, 10_000),
    "dragon_bonus_player": (100, 50_000),
    "dragon_bonus_banker": (100, 50_000),
    "big": (100, 100_000),
    "small": (100, 100_000),
    "super_6": (100, 10_000),
    "dragon_7": (100, 10_000),
    "panda_8": (100, 10_000),
}
"""Limits of the side bets a table of :func:`play` may also offer (``side_bets``)."""
SUPERVISOR = "supervisor-7"
"""Who signs the voids of :func:`play`."""


class LocalSystem:
    """The three Applications wired together in memory (in place of Kafka)."""

    def __init__(
        self, envs: Mapping[str, dict[str, str]], supervisor: SupervisorSigner | None = None
    ) -> None:
        """``supervisor`` signs the voids (default: a key made for this system alone, the one
        key of dealing's supervisors keyring); else dealing reads the keyring its env names."""
        supervisors = None
        if supervisor is None:
            supervisor = SupervisorSigner(
                f"{SUPERVISOR}-1", SUPERVISOR, Ed25519PrivateKey.generate()
            )
            public = supervisor.key.public_key()
            key = SupervisorKey(supervisor.kid, SUPERVISOR, public)
            supervisors = SupervisorKeyring({key.kid: key})
        self.supervisor = supervisor
        self.shoe = ShoeApplication(env=dict(envs["shoe"]))
        self.dealing = DealingApplication(env=dict(envs["dealing"]), supervisors=supervisors)
        self.supervisors = self.dealing.voids.keyring
        """Who may sign a void: what the audit verifies the stored voids with."""
        self.settlement = SettlementApplication(env=dict(envs["settlement"]))
        self.apps: dict[str, ServiceApplication] = {
            "shoe": self.shoe,
            "dealing": self.dealing,
            "settlement": self.settlement,
        }
        self._mappers: dict[str, Callable[[Any], Sequence[Message]]] = {
            "shoe": shoe_messages,
            "dealing": dealing_messages,
            "settlement": settlement_messages,
        }
        self._relayed = {
            name: app.tracked_position(f"relay:{name}") for name, app in self.apps.items()
        }
        self._bet_offsets = {
            operator: self.settlement.tracked_position(f"{bet_commands_topic(operator)}:0")
            for operator in self.settlement.operators
        }
        self.published: list[Message] = []
        self.keep_published = False

    @classmethod
    def from_settings(cls, settings: Settings) -> LocalSystem:
        """Open the three stores the settings name (SQLite files or PostgreSQL schemas); the
        shoe's secret key file is made when missing, as ``punto-banco keys init`` does."""
        init_secret_key(settings.for_service("shoe"))
        envs = {}
        for name in SERVICES:
            own = settings.for_service(name)
            prepare_store(own)
            envs[name] = own.eventsourcing_env()
        private, key = ensure_supervisor_key(
            settings.supervisor_keyring_path,
            settings.supervisor_keys_dir / f"{SUPERVISOR}.pem",
            SUPERVISOR,
        )  # in the keyring file dealing reads (PB_SUPERVISOR_KEYRING), as the audit does
        return cls(envs, SupervisorSigner(key.kid, key.supervisor, private))

    @classmethod
    def in_memory(
        cls, shoe_secret_key: str | None = None, operators: Sequence[str] = (HOUSE,)
    ) -> LocalSystem:
        """Three in-memory stores; the shoe's secret keys are ``shoe_secret_key``
        (``PB_SHOE_SECRET_KEY``'s form), by default a key made for this system alone;
        ``operators``: settlement's ``PB_OPERATORS``."""
        popo = {"PERSISTENCE_MODULE": "eventsourcing.popo"}
        if shoe_secret_key is None:
            shoe_secret_key = env_form(SecretKeys(((next_kid(()), new_key()),), "in memory"))
        secret = {"PB_SHOE_SECRET_KEY": shoe_secret_key, "PB_SHOE_SECRET_KEY_FILE": ""}
        envs = {name: {**popo, **secret} if name == "shoe" else popo for name in SERVICES}
        envs["settlement"] = {**popo, "PB_OPERATORS": ",".join(operators)}
        return cls(envs)

    def close(self) -> None:
        for app in self.apps.values():
            app.close()

    def __enter__(self) -> LocalSystem:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # -- commands from outside -------------------------------------------------------
    def command(self, message: Message) -> None:
        """A table command (OpenTable, CloseBetting, VoidCoup, CloseTable) to dealing."""
        self.dealing.handle(message)
        self.pump()

    def place_bets(self, bets: Sequence[PlaceBet], operator: str = HOUSE) -> None:
        """A batch of ``operator``'s PlaceBet, as one fetched Kafka batch of its bet-commands
        topic (one transaction)."""
        if not bets:
            return
        position = self._bet_offsets[operator] = self._bet_offsets.get(operator, 0) + len(bets)
        tracking = Tracking(f"{bet_commands_topic(operator)}:0", position)
        self.settlement.handle_batch(list(bets), tracking, operator=operator)

    def seal(self) -> None:
        """Seal every store (as the services do periodically and on shutdown)."""
        for name, app in self.apps.items():
            seal_store(app, name)

    # -- the relays ------------------------------------------------------------------
    def pump(self) -> None:
        """Relay every Application's new events until all are quiet."""
        busy = True
        while busy:
            busy = False
            for name in SERVICES:
                busy = self._relay(name) or busy

    def _relay(self, source: str) -> bool:
        app = self.apps[source]
        notifications = app.process_recorder.select_notifications(
            start=self._relayed[source] + 1, limit=500
        )
        if source == "settlement" and not self.keep_published and notifications:
            # Only dealing's BetsClosed is consumed here (bettors take the rest): map
            # the books' BettingClosed alone and skip mapping the others.
            for notification in notifications:
                if notification.topic == BOOK_CLOSED:
                    event = app.mapper.to_domain_event(notification)
                    for index, message in enumerate(without_seals(self._mappers[source])(event)):
                        self._bets_closed(message, notification.id * POSITION_FACTOR + index)
            self._relayed[source] = notifications[-1].id
            app.record_position(f"relay:{source}", self._relayed[source])
            return True
        for notification in notifications:
            event = app.mapper.to_domain_event(notification)
            messages = without_seals(self._mappers[source])(event)
            table_events: list[Message] = []
            for index, message in enumerate(messages):
                if self.keep_published:
                    self.published.append(message)
                topic = topic_for(message)
                tracking = Tracking(
                    f"{source}:{topic}:0", notification.id * POSITION_FACTOR + index
                )
                if topic == SHOE_COMMANDS:
                    with self.shoe.unit_of_work(tracking) as uow:
                        apply_command(self.shoe, uow, message)
                elif topic == SHOE_EVENTS:
                    self.dealing.handle(message, tracking)
                    if isinstance(message, CardDrawn):  # settlement checks claims by them
                        self.settlement.handle(message, tracking)
                elif topic == BET_COMMANDS:  # dealing's marks, on every operator's topic
                    for operator in self.settlement.operators:
                        self._bet_offsets[operator] = self._bet_offsets.get(operator, 0) + 1
                        position = self._bet_offsets[operator]
                        tracking = Tracking(f"{bet_commands_topic(operator)}:0", position)
                        self.settlement.handle(message, tracking, operator=operator)
                elif topic == TABLE_EVENTS:
                    table_events.append(message)
                elif topic == BOOK_EVENTS:
                    self._bets_closed(message, tracking.notification_id)
            if table_events:
                last = Tracking(
                    f"{source}:{TABLE_EVENTS}:0",
                    notification.id * POSITION_FACTOR + len(messages) - 1,
                )
                self.settlement.handle_batch(table_events, last)
            self._relayed[source] = notification.id
        if notifications:
            app.record_position(f"relay:{source}", self._relayed[source])
        return bool(notifications)

    def _bets_closed(self, message: Message, position: int) -> None:
        """Settlement's BetsClosed to dealing (bet events have no consumer here)."""
        if isinstance(message, BetsClosed):
            tracking = Tracking(f"settlement:{BOOK_EVENTS}:0", position)
            self.dealing.handle_bet_events([message], tracking)

    # -- queries ---------------------------------------------------------------------
    def current_coup(self, table_id: str) -> str | None:
        table = self.dealing.get_table(table_id)
        return None if table is None else table.current_coup_id


@dataclass
class PlayLog:
    """What :func:`play` did, to compare with what the audit and recall find."""

    coups: list[str] = field(default_factory=list)
    voided: dict[str, tuple[str, str]] = field(default_factory=dict)  # coup -> (who, why)
    bets: dict[str, list[str]] = field(default_factory=dict)  # coup -> bet ids sent
    late_bets: list[str] = field(default_factory=list)
    invalid_bets: list[str] = field(default_factory=list)


def open_table_command(
    table_id: str, decks: int = 8, paytable: str = "standard", side_bets: Sequence[str] = ()
) -> OpenTable:
    """A table of LIMITS' bet types and ``side_bets`` (SIDE_LIMITS)."""
    limits = {**LIMITS, **{bet_type: SIDE_LIMITS[bet_type] for bet_type in side_bets}}
    return OpenTable(
        table_id=table_id,
        decks=decks,
        paytable=paytable,
        limits={k: BetLimitSpec(minimum=lo, maximum=hi) for k, (lo, hi) in limits.items()},
        currency="EUR",
        betting_window_ms=3_600_000,
        cut_card_from_end=16,
    )


def _bets(
    table_id: str,
    coup_id: str,
    count: int,
    rng: random.Random,
    prefix: str,
    side_bets: Sequence[str] = (),
) -> list[PlaceBet]:
    """``count`` valid bets; a bettor backs only one of Player/Banker (by bettor number)."""
    bets = []
    for index in range(count):
        number = index % 97
        side = "player" if number % 2 == 0 else "banker"
        kinds = (side, "tie", side, "player_pair", "banker_pair", *side_bets)
        kind = kinds[(index // 97 + number) % len(kinds)]
        low, high = LIMITS.get(kind) or SIDE_LIMITS[kind]
        bets.append(
            PlaceBet(
                table_id=table_id,
                coup_id=coup_id,
                bet_id=f"{prefix}{coup_id}.b{index}",
                bettor_id=f"bettor-{number}",
                bet_type=kind,
                amount=rng.randrange(low, min(high, 20_000) + 1),
                currency="EUR",
            )
        )
    return bets


def play(
    system: LocalSystem,
    table_id: str,
    coups: int,
    *,
    bets_per_coup: int = 5,
    decks: int = 8,
    paytable: str = "standard",
    void_every: int = 0,
    invalid_every: int = 0,
    late_every: int = 0,
    batch: int = 0,
    seed: int = 1,
    bet_prefix: str = "",
    on_coup: Any = None,
    operators: Sequence[str] = (HOUSE,),
    side_bets: Sequence[str] = (),
) -> PlayLog:
    """Open ``table_id`` and play ``coups`` coups (new shoes as the cut card comes out).

    ``void_every`` N: every Nth coup is voided by a supervisor (alternately before
    the cards and after the result); ``invalid_every``: bets refused by the limits
    and opposing Player/Banker bets; ``late_every``: a bet sent after betting closed.
    ``batch``: PlaceBet per settlement transaction (0: all of a coup's bets in one).
    ``operators``: each places the same bets (the same ids: each operator has its own).
    ``side_bets``: bet types the table offers besides LIMITS' (its paytable's), bet too.
    """
    rng = random.Random(seed)
    log = PlayLog()
    system.command(open_table_command(table_id, decks, paytable, side_bets))
    for number in range(1, coups + 1):
        coup_id = system.current_coup(table_id)
        if coup_id is None:
            raise RuntimeError(f"table {table_id} has no coup in play after {number - 1} coups")
        log.coups.append(coup_id)
        bets = _bets(table_id, coup_id, bets_per_coup, rng, bet_prefix, side_bets)
        if invalid_every and number % invalid_every == 0:
            bad = [
                PlaceBet(
                    table_id=table_id,
                    coup_id=coup_id,
                    bet_id=f"{bet_prefix}{coup_id}.small",
                    bettor_id="bettor-small",
                    bet_type="tie",
                    amount=1,
                    currency="EUR",
                ),
                PlaceBet(
                    table_id=table_id,
                    coup_id=coup_id,
                    bet_id=f"{bet_prefix}{coup_id}.opp1",
                    bettor_id="bettor-both",
                    bet_type="player",
                    amount=500,
                    currency="EUR",
                ),
                PlaceBet(
                    table_id=table_id,
                    coup_id=coup_id,
                    bet_id=f"{bet_prefix}{coup_id}.opp2",
                    bettor_id="bettor-both",
                    bet_type="banker",
                    amount=500,
                    currency="EUR",
                ),
            ]
            log.invalid_bets += [bad[0].bet_id, bad[2].bet_id]
            bets += bad
        log.bets[coup_id] = [bet.bet_id for bet in bets]
        size = batch or len(bets) or 1
        for start in range(0, len(bets), size):
            for operator in operators:
                system.place_bets(bets[start : start + size], operator)
        void = bool(void_every) and number % void_every == 0
        if void and (number // void_every) % 2 == 1:
            _void(system, log, table_id, coup_id, "dealer exposed a card")
        else:
            system.command(CloseBetting(table_id=table_id, coup_id=coup_id))
            if void:
                _void(system, log, table_id, coup_id, "misdeal found on review")
        if late_every and number % late_every == 0:
            late = PlaceBet(
                table_id=table_id,
                coup_id=coup_id,
                bet_id=f"{bet_prefix}{coup_id}.late",
                bettor_id="bettor-late",
                bet_type="player",
                amount=1_000,
                currency="EUR",
            )
            log.late_bets.append(late.bet_id)
            for operator in operators:
                system.place_bets([late], operator)
        if on_coup is not None:
            on_coup(number)
    return log


def _void(system: LocalSystem, log: PlayLog, table_id: str, coup_id: str, reason: str) -> None:
    void: VoidCoup = system.supervisor.void(table_id, coup_id, reason)
    system.command(void)
    log.voided[coup_id] = (system.supervisor.supervisor_id, reason)


def close_table(system: LocalSystem, table_id: str) -> None:
    system.command(CloseTable(table_id=table_id, reason="end of session"))


@contextmanager
def local_system(settings: Settings | None = None) -> Iterator[LocalSystem]:
    system = LocalSystem.in_memory() if settings is None else LocalSystem.from_settings(settings)
    try:
        yield system
    finally:
        system.close()


def new_bet_prefix() -> str:
    return uuid4().hex[:6] + "."
