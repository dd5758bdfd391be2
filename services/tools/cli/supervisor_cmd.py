"""``punto-banco supervisor keygen|void|correct``: supervisors' keys, their signed voids and
corrections of a held studio coup (``correct``: ``CorrectCoup``, answered by the coup resolved
on the cards decided, docs/studio.md).

A void is a supervisor's decision signed with their Ed25519 key (a JWT, EdDSA:
``services/tools/admin/supervisors.py``). ``keygen`` makes a supervisor's key (the private key
file, mode 0600, and its entry in the supervisors keyring dealing verifies with; the
supervisor's earlier keys are retired: rotation). ``void`` builds the ``VoidCoup``, signs it,
sends it to the table-commands topic (with the platform's Kafka settings:
``KAFKA_BOOTSTRAP_SERVERS``, ``PB_TOPIC_PREFIX``), prints what it sent and waits for dealing's
answer: ``CoupVoided`` on table-events (exit 0) or ``CommandRejected`` on command-events (exit
1, with the reason); none in time: exit 3.
"""

from __future__ import annotations

import asyncio
import json
import re
import time
from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated

import typer

if TYPE_CHECKING:
    from contracts import CorrectCoup, CorrectResult, Message, VoidCoup
    from services.shared.platform.settings import Settings
    from services.tools.admin.supervisors import (
        SupervisorSigner,
    )

supervisor_app = typer.Typer(
    name="supervisor",
    help="Supervisors' Ed25519 keys and their signed decisions (voids).",
    no_args_is_help=True,
)

EXIT_REFUSED = 1
EXIT_USAGE = 2
EXIT_NO_ANSWER = 3

DataDir = Annotated[
    Path | None,
    typer.Option("--data-dir", help="Folder whose keys/ holds the keyring (env PB_DATA_DIR)."),
]
KeyringOption = Annotated[
    Path | None,
    typer.Option(
        "--keyring",
        help="The supervisors keyring (default: PB_SUPERVISOR_KEYRING or "
        "<data dir>/keys/supervisors.json).",
    ),
]


def _fail(message: str, code: int = EXIT_USAGE) -> typer.Exit:
    typer.echo(f"error: {message}", err=True)
    return typer.Exit(code)


def _settings(data_dir: Path | None) -> Settings:
    from services.shared.platform.settings import Settings, SettingsError

    try:
        return Settings.from_env("supervisor", data_dir=data_dir)
    except SettingsError as error:
        raise _fail(str(error)) from None


@supervisor_app.command("keygen")
def keygen_command(
    supervisor_id: Annotated[str, typer.Option("--id", help="The supervisor's id (sup-7).")],
    out: Annotated[
        Path | None,
        typer.Option(
            "--out", help="Folder of the private key <ID>.pem (default keys/supervisors)."
        ),
    ] = None,
    keyring: KeyringOption = None,
    data_dir: DataDir = None,
) -> None:
    """A new key for a supervisor: the private key (0600) and its public entry in the keyring.

    Run again for the same id to rotate: the new key gets the next id, the supervisor's earlier
    keys are retired now (dealing refuses what they sign from then on; the audit still verifies
    the voids they signed before). Dealing reads its keyring file again by itself.
    """
    from services.shared.platform.security import (
        SupervisorKeysError,
    )
    from services.tools.admin.supervisors import (
        add_supervisor_key,
    )
    from services.tools.admin.supervisors import (
        entry_json as entries,
    )

    settings = _settings(data_dir)
    folder = out if out is not None else settings.supervisor_keys_dir
    ring = keyring if keyring is not None else settings.supervisor_keyring_path
    key_path = folder / f"{supervisor_id}.pem"
    try:
        key, retired = add_supervisor_key(ring, key_path, supervisor_id)
    except (SupervisorKeysError, OSError) as error:
        raise _fail(str(error), 1) from None
    typer.echo(f"supervisor {supervisor_id}: key {key.kid}, private key {key_path} (mode 0600)")
    typer.echo(
        f"keyring {ring}: {key.kid} added" + (f", {', '.join(retired)} retired" if retired else "")
    )
    typer.echo("its keyring entry (for a keyring kept elsewhere):")
    typer.echo(entries([key]), nl=False)


def _signer(key: Path, keyring: Path, kid: str | None, supervisor: str | None) -> SupervisorSigner:
    from services.shared.platform.security import (
        SupervisorKeyring,
        SupervisorKeysError,
    )
    from services.tools.admin.supervisors import (
        SupervisorSigner,
        load_supervisor_key,
    )

    try:
        if kid is not None:
            who = supervisor or re.sub(r"-[0-9]+$", "", kid)
            return SupervisorSigner(kid, who, load_supervisor_key(key))
        return SupervisorSigner.from_file(key, SupervisorKeyring.load(keyring))
    except SupervisorKeysError as error:
        raise _fail(f"{error} (or give --kid)") from None


@supervisor_app.command("void")
def void_command(
    table: Annotated[str, typer.Option("--table", help="The table.")],
    coup: Annotated[str, typer.Option("--coup", help="The coup to void.")],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded, and signed).")],
    key: Annotated[Path, typer.Option("--key", help="The supervisor's private key file.")],
    keyring: KeyringOption = None,
    kid: Annotated[
        str | None, typer.Option("--kid", help="The key's id, when no keyring is at hand.")
    ] = None,
    supervisor: Annotated[
        str | None, typer.Option("--supervisor", help="With --kid: the supervisor's id.")
    ] = None,
    valid_for: Annotated[
        int, typer.Option("--valid-for", min=10, max=3600, help="Seconds the decision is valid.")
    ] = 300,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for dealing's answer.")
    ] = 30.0,
    data_dir: DataDir = None,
) -> None:
    """Sign a void of the coup --coup of --table, send it to dealing, and wait for its answer
    (CoupVoided or CommandRejected)."""
    from contracts import CommandRejected, CoupVoided, encode
    from services.shared.platform.security import DecisionRefused, read_decision

    settings = _settings(data_dir)
    signer = _signer(key, keyring or settings.supervisor_keyring_path, kid, supervisor)
    try:
        command = signer.void(table, coup, reason, lifetime=timedelta(seconds=valid_for))
        assert command.authorization is not None
        read_decision(command.authorization)  # what dealing will read
    except (ValueError, DecisionRefused) as error:
        raise _fail(f"cannot make this void: {error}") from None
    typer.echo(f"sending to {settings.topic_prefix}punto-banco.table-commands (key {table}):")
    typer.echo(json.dumps(json.loads(encode(command)), indent=2))
    try:
        answer = asyncio.run(send_and_wait(settings, command, timeout))
    except Exception as error:  # Kafka unreachable, topic missing...
        where = settings.kafka_bootstrap_servers
        raise _fail(f"cannot send to Kafka at {where}: {error}", 1) from None
    if answer is None:
        raise _fail(
            f"no answer from dealing within {timeout:g} s: it may be down or behind; the void "
            f"is on table-commands and is handled if dealing reads it within {valid_for} s "
            "(else it is refused as expired: sign again)",
            EXIT_NO_ANSWER,
        )
    if isinstance(answer, CommandRejected):
        raise _fail(f"refused: {answer.reason_code}: {answer.message}", EXIT_REFUSED)
    assert isinstance(answer, CoupVoided)
    resolved = " (it had been settled: winnings are taken back)" if answer.was_resolved else ""
    typer.echo(
        f"voided: table {answer.table_id} coup {answer.coup_id} by {answer.supervisor_id}"
        f"{resolved}; every bet is refunded"
    )


async def send_and_wait(
    settings: Settings, command: VoidCoup | CorrectCoup | CorrectResult, timeout: float
) -> Message | None:
    """Send ``command`` and return dealing's answer to it (None: none within ``timeout`` s):
    the ``CommandRejected`` naming it, or the ``CoupVoided`` of its coup by its supervisor (a
    void), the ``CoupResolved`` of its coup (a correction: dealt on the cards decided), its
    ``CoupCorrected`` (a settled coup's result corrected)."""
    from aiokafka import AIOKafkaConsumer, TopicPartition

    from contracts import (
        COMMAND_EVENTS,
        TABLE_COMMANDS,
        TABLE_EVENTS,
        CommandRejected,
        ContractError,
        CorrectCoup,
        CorrectResult,
        CoupCorrected,
        CoupResolved,
        CoupVoided,
        decode,
        encode,
    )
    from services.shared.platform.kafka import client_options, idempotent_producer

    # The void (or the corrected coup resolved) on table-events, a refusal on command-events.
    answer = {CorrectCoup: CoupResolved, CorrectResult: CoupCorrected}.get(
        type(command), CoupVoided
    )
    topics = {settings.topic(logical): logical for logical in (TABLE_EVENTS, COMMAND_EVENTS)}
    consumer = AIOKafkaConsumer(
        **client_options(settings),
        client_id="pb-supervisor-answers",
        group_id=None,
        enable_auto_commit=False,
    )
    producer = idempotent_producer(settings, "void")
    await consumer.start()
    try:
        partitions = [
            TopicPartition(topic, p)
            for topic in topics
            for p in sorted(await _partitions(consumer, topic))
        ]
        consumer.assign(partitions)
        await consumer.seek_to_end(*partitions)
        for partition in partitions:  # the position now: nothing published later is missed
            await consumer.position(partition)
        await producer.start()
        try:
            await producer.send_and_wait(
                settings.topic(TABLE_COMMANDS), encode(command), key=command.table_id.encode()
            )
        finally:
            await producer.stop()
        deadline = time.monotonic() + timeout
        while (left := deadline - time.monotonic()) > 0:
            batches = await consumer.getmany(timeout_ms=int(min(left, 0.5) * 1000))
            for records in batches.values():
                for record in records:
                    try:
                        message = decode(topics[record.topic], record.value or b"")
                    except ContractError:
                        continue
                    if isinstance(message, CommandRejected):
                        if message.command_id == command.event_id:
                            return message
                    elif (
                        isinstance(message, answer)
                        and (message.table_id, message.coup_id)
                        == (command.table_id, command.coup_id)
                        and getattr(message, "supervisor_id", None) in (None, command.supervisor_id)
                    ):
                        return message
        return None
    finally:
        await consumer.stop()


@supervisor_app.command("correct")
def correct_command(
    table: Annotated[str, typer.Option("--table", help="The studio table.")],
    coup: Annotated[str, typer.Option("--coup", help="The held coup to correct.")],
    cards: Annotated[
        str, typer.Option("--cards", help="All the coup's cards in dealing order: '9S 2D TH 3C'.")
    ],
    reason: Annotated[str, typer.Option("--reason", help="Why (recorded, and signed).")],
    key: Annotated[Path, typer.Option("--key", help="The supervisor's private key file.")],
    keyring: KeyringOption = None,
    settled: Annotated[
        bool,
        typer.Option(
            "--settled",
            help="The coup resolved and settled on a misread card: correct its result "
            "(CorrectResult; its bets are paid the differences).",
        ),
    ] = False,
    timeout: Annotated[
        float, typer.Option("--timeout", min=1, help="Seconds to wait for dealing's answer.")
    ] = 30.0,
    data_dir: DataDir = None,
) -> None:
    """Sign a correction of a studio coup (its cards as the supervisor decided them, e.g. from
    the video), send it to dealing and wait: a held coup resolves on them; with --settled a
    settled coup's result is corrected (CoupCorrected); or CommandRejected. docs/studio.md."""
    from contracts import CommandRejected, CoupCorrected, CoupResolved, encode

    settings = _settings(data_dir)
    signer = _signer(key, keyring or settings.supervisor_keyring_path, None, None)
    decided = cards.replace(",", " ").split()
    make = signer.correct_result if settled else signer.correct
    try:
        command = make(table, coup, decided, reason)
    except ValueError as error:
        raise _fail(f"cannot make this correction: {error}") from None
    typer.echo(f"sending to {settings.topic_prefix}punto-banco.table-commands (key {table}):")
    typer.echo(json.dumps(json.loads(encode(command)), indent=2))
    try:
        answer = asyncio.run(send_and_wait(settings, command, timeout))
    except Exception as error:  # Kafka unreachable, topic missing...
        where = settings.kafka_bootstrap_servers
        raise _fail(f"cannot send to Kafka at {where}: {error}", 1) from None
    if answer is None:
        raise _fail(f"the coup did not resolve within {timeout:g} s", EXIT_NO_ANSWER)
    if isinstance(answer, CommandRejected):
        raise _fail(f"refused: {answer.reason_code}: {answer.message}", EXIT_REFUSED)
    assert isinstance(answer, CoupResolved | CoupCorrected)
    typer.echo(f"corrected: table {table} coup {coup} resolved {answer.outcome} on its cards")


async def _partitions(consumer: object, topic: str, wait: float = 15.0) -> set[int]:
    from aiokafka import AIOKafkaConsumer

    assert isinstance(consumer, AIOKafkaConsumer)
    deadline = time.monotonic() + wait
    while True:
        found = consumer.partitions_for_topic(topic)
        if found:
            return set(found)
        if time.monotonic() > deadline:
            raise RuntimeError(f"topic {topic} has no partitions (is PB_TOPIC_PREFIX right?)")
        await consumer._client.force_metadata_update()
        await asyncio.sleep(0.2)


def register(app: typer.Typer) -> None:
    app.add_typer(supervisor_app)
