"""The AsyncAPI documents come from the services' real brokers, headers and keys included."""

import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

from contracts import (
    BET_COMMANDS,
    DEAD_LETTERS,
    INCIDENTS,
    MESSAGE_SOURCES,
    SHOE_EVENTS,
    TABLE_COMMANDS,
    TOPIC_MESSAGES,
    TOPIC_OWNERS,
)
from services.shared.platform.host.asyncapi import published_union
from services.shared.platform.host.faststream import asyncapi_json
from services.shared.platform.relay import SIGNED_TOPICS
from services.tools.cli.main import app
from services.tools.cli.serve_cmd import services_for_documents

SERVICES = ("shoe", "dealing", "settlement")


@pytest.fixture(scope="module")
def services() -> list[Any]:
    return services_for_documents("127.0.0.1:9092")


@pytest.fixture(scope="module")
def system(services: list[Any]) -> dict[str, Any]:
    document: dict[str, Any] = json.loads(asyncapi_json([s.broker for s in services]))
    return document


def channels(document: dict[str, Any], action: str) -> dict[str, dict[str, Any]]:
    """Per channel name with an operation ``action`` (send / receive): the channel."""
    found = {}
    for operation in document["operations"].values():
        if operation["action"] == action:
            name = operation["channel"]["$ref"].rsplit("/", 1)[-1].replace("%20", " ")
            found[name] = document["channels"][name]
    return found


def message(document: dict[str, Any], channel: dict[str, Any]) -> dict[str, Any]:
    (reference,) = channel["messages"].values()
    name = reference["$ref"].rsplit("/", 1)[-1].replace("%20", " ")
    found: dict[str, Any] = document["components"]["messages"][name]
    return found


def test_every_topic_is_consumed_or_published_by_a_service(system: dict[str, Any]) -> None:
    addresses = {channel["address"] for channel in system["channels"].values()}
    assert addresses == set(TOPIC_MESSAGES)
    schemas = system["components"]["schemas"]
    for models in TOPIC_MESSAGES.values():
        for model in models:
            assert model.__name__ in schemas


def test_each_service_consumes_with_one_subscriber(services: list[Any]) -> None:
    for service in services:  # the studio bridge reads its device, no topic
        assert len(service.broker.subscribers) == (service.name != "studio-bridge")
    assert {s.name: set(s.inputs) for s in services} == {
        "shoe": {"punto-banco.shoe-commands", "punto-banco.studio-reads"},
        "dealing": {TABLE_COMMANDS, SHOE_EVENTS, "punto-banco.book-events"},
        "settlement": {SHOE_EVENTS, "punto-banco.table-events", BET_COMMANDS},
        "studio-bridge": set(),
    }


def test_each_service_documents_every_message_it_may_send(services: list[Any]) -> None:
    for service in services:
        sent = {name for name, source in MESSAGE_SOURCES.items() if source == service.name}
        documented = {
            model.__name__
            for topic in service.outputs
            for model in TOPIC_MESSAGES[topic]
            if topic in (DEAD_LETTERS, INCIDENTS) or model.__name__ in sent
        }
        assert sent <= documented, service.name
        assert {DEAD_LETTERS, INCIDENTS} <= set(service.outputs)


def test_a_service_cannot_document_a_topic_it_may_not_write() -> None:
    with pytest.raises(ValueError, match="shoe publishes nothing"):
        published_union("shoe", "punto-banco.table-events")


def test_a_consumed_channel_carries_its_topics_messages_one_per_record(
    system: dict[str, Any],
) -> None:
    for channel in channels(system, "receive").values():
        payload = message(system, channel)["payload"]
        refs = [item["$ref"] for item in payload.get("oneOf", [payload])]
        named = {ref.rsplit("/", 1)[-1] for ref in refs}
        assert named == {m.__name__ for m in TOPIC_MESSAGES[channel["address"]]}
    assert not [name for name in system["components"]["schemas"] if "consumes" in name]


def test_relay_headers_and_the_key_are_described(system: dict[str, Any]) -> None:
    for channel in channels(system, "send").values():
        topic = channel["address"]
        described = message(system, channel)
        headers = described["headers"]
        assert described["bindings"]["kafka"]["key"]["type"] == "string"
        assert "table id" in described["bindings"]["kafka"]["key"]["description"]
        assert described["correlationId"]["location"] == "$message.payload#/correlation_id"
        assert {"pb-source", "pb-notification-id", "pb-message-index", "pb-type"} <= set(
            headers["properties"]
        )
        if topic == DEAD_LETTERS:
            assert "required" not in headers  # a DeadLetter has none
        else:
            signed = {"pb-sig"} if topic in SIGNED_TOPICS else set()
            assert set(headers["required"]) == {
                "pb-source",
                "pb-notification-id",
                "pb-message-index",
                "pb-type",
                *signed,
            }
    for channel in channels(system, "receive").values():
        topic = channel["address"]
        headers = message(system, channel)["headers"]
        owner = TOPIC_OWNERS.get(topic)
        if owner is None:
            assert "required" not in headers
        else:
            assert headers["properties"]["pb-source"]["const"] == owner
            assert "pb-sig" in headers["required"]


def test_cli_writes_the_document(tmp_path: Path) -> None:
    out = tmp_path / "asyncapi.json"
    result = CliRunner().invoke(app, ["asyncapi", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["asyncapi"] == "3.0.0"


def test_each_service_document_names_only_its_own_channels(services: list[Any]) -> None:
    for service in services:
        document = json.loads(service.asyncapi_json())
        assert document["info"]["title"] == f"punto-banco {service.name}"
        assert all(name.startswith(service.name + " ") for name in document["channels"])


def test_cli_exports_one_document_per_service_and_the_system(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["asyncapi-export", "--output", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert sorted(p.name for p in tmp_path.iterdir()) == [
        "dealing.json",
        "settlement.json",
        "shoe.json",
        "studio-bridge.json",
        "system.json",
    ]
