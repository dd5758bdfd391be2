"""The committed JSON Schemas match the contracts, and incompatible changes are caught."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner

import contracts as c
from services.tools.cli.main import app

COMMITTED = Path(c.__file__).parent / "schemas"
EXPORT_HINT = "run `punto-banco contracts export contracts/schemas` deliberately"


def _committed_documents() -> dict[str, Any]:
    return {p.name: json.loads(p.read_text(encoding="utf-8")) for p in COMMITTED.glob("*.json")}


def test_committed_schemas_have_no_breaking_changes_against_the_contracts() -> None:
    changes = c.breaking_changes(_committed_documents(), c.schema_documents())
    assert not changes, (
        "The contracts break compatibility with the committed schemas:\n  "
        + "\n  ".join(changes)
        + f"\nIf that is deliberate (bump schema_version, tell integrators), {EXPORT_HINT}."
    )


def test_committed_schemas_equal_freshly_generated_ones() -> None:
    generated = c.schema_files()
    on_disk = {p.name: p.read_text(encoding="utf-8") for p in COMMITTED.glob("*.json")}
    differing = sorted(
        name for name in set(generated) | set(on_disk) if generated.get(name) != on_disk.get(name)
    )
    assert not differing, (
        f"contracts/schemas is out of date for: {', '.join(differing)}. "
        f"If the contract change is intended, {EXPORT_HINT}."
    )


def test_there_is_one_schema_per_message_and_an_index() -> None:
    files = c.schema_files()
    assert set(files) == {f"{name}.json" for name in c.MESSAGE_TYPES} | {"index.json"}
    index = json.loads(files["index.json"])
    assert index["topics"] == {
        topic: [m.__name__ for m in models] for topic, models in c.TOPIC_MESSAGES.items()
    }


def test_schemas_are_deterministic_json_with_sorted_keys_and_a_final_newline() -> None:
    files = c.schema_files()
    assert files == c.schema_files()
    for text in files.values():
        assert text.endswith("}\n")
        assert text == json.dumps(json.loads(text), sort_keys=True, indent=2) + "\n"


@pytest.mark.parametrize("name", sorted(c.MESSAGE_TYPES))
def test_each_schema_documents_every_field_and_requires_the_wire_envelope(name: str) -> None:
    schema = c.schema_documents()[f"{name}.json"]
    assert schema["properties"]["type"]["const"] == name
    assert schema["additionalProperties"] is False
    assert {"type", "event_id", "occurred_at"} <= set(schema["required"])
    undocumented = [f for f, spec in schema["properties"].items() if not spec.get("description")]
    assert not undocumented, f"{name}: fields without a description: {undocumented}"
    assert schema["x-topic"] == c.MESSAGE_TOPICS[name]


def test_a_voids_signed_decision_is_bounded_and_optional_in_its_schema() -> None:
    spec = c.schema_documents()["VoidCoup.json"]["properties"]["authorization"]
    token = next(option for option in spec["anyOf"] if option.get("type") == "string")
    assert token["maxLength"] == c.MAX_AUTHORIZATION
    assert token["pattern"] == r"^[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+$"
    assert "authorization" not in c.schema_documents()["VoidCoup.json"]["required"]
    assert "RFC 7519" in spec["description"] and "EdDSA" in spec["description"]


def test_money_fields_are_integers_in_every_schema() -> None:
    money = {"amount", "stake", "payout", "returned", "staked", "paid", "refunded", "adjustment"}
    for name, schema in c.schema_documents().items():
        if name in {"index.json", "PlaceBet.json", "BetRejected.json"}:
            continue
        for field in money & set(schema.get("properties", {})):
            assert schema["properties"][field]["type"] == "integer", f"{name}: {field}"


# --- the compatibility check ----------------------------------------------------------------


@pytest.fixture
def current() -> dict[str, Any]:
    return copy.deepcopy(c.schema_documents())


def test_no_breaking_changes_between_identical_schemas(current: dict[str, Any]) -> None:
    assert c.breaking_changes(current, copy.deepcopy(current)) == []


def test_adding_an_optional_field_is_not_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    new["PlaceBet.json"]["properties"]["note"] = {"type": "string", "default": ""}
    assert c.breaking_changes(current, new) == []


def test_a_description_change_is_not_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    new["PlaceBet.json"]["properties"]["bet_id"]["description"] = "reworded"
    assert c.breaking_changes(current, new) == []


def test_a_removed_field_is_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    del new["BetSettled.json"]["properties"]["payout"]
    assert c.breaking_changes(current, new) == ["BetSettled.payout: field removed"]


def test_a_newly_required_field_is_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    new["CloseTable.json"]["required"].append("reason")
    assert c.breaking_changes(current, new) == ["CloseTable.reason: field is newly required"]


def test_a_changed_field_type_is_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    new["BetSettled.json"]["properties"]["stake"]["type"] = "string"
    (change,) = c.breaking_changes(current, new)
    assert change.startswith("BetSettled.stake: type or constraints changed")


def test_a_change_inside_a_nested_definition_is_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    new["OpenTable.json"]["$defs"]["BetLimitSpec"]["properties"]["minimum"]["minimum"] = 5
    (change,) = c.breaking_changes(current, new)
    assert change.startswith("OpenTable.limits: type or constraints changed")


def test_a_removed_message_or_topic_move_is_breaking(current: dict[str, Any]) -> None:
    new = copy.deepcopy(current)
    del new["CoupRefunded.json"]
    new["index.json"]["topics"]["punto-banco.bet-events"].remove("CoupRefunded")
    assert c.breaking_changes(current, new) == [
        "CoupRefunded no longer travels on punto-banco.bet-events",
        "CoupRefunded: message type removed",
    ]


# --- the CLI ------------------------------------------------------------------------------------


def test_cli_export_then_check_succeeds(tmp_path: Path) -> None:
    runner = CliRunner()
    exported = runner.invoke(app, ["contracts", "export", str(tmp_path / "schemas")])
    assert exported.exit_code == 0, exported.output
    files = {p.name: p.read_text(encoding="utf-8") for p in (tmp_path / "schemas").iterdir()}
    assert files == c.schema_files()
    checked = runner.invoke(app, ["contracts", "check", str(tmp_path / "schemas")])
    assert checked.exit_code == 0, checked.output


def test_cli_check_fails_on_a_breaking_difference_and_says_how_to_fix(tmp_path: Path) -> None:
    runner = CliRunner()
    runner.invoke(app, ["contracts", "export", str(tmp_path)])
    schema_path = tmp_path / "BetSettled.json"
    schema = json.loads(schema_path.read_text(encoding="utf-8"))
    schema["properties"]["legacy"] = {"type": "string"}
    schema_path.write_text(json.dumps(schema), encoding="utf-8")
    (tmp_path / "Gone.json").write_text(
        json.dumps({"$id": "punto-banco/contracts/Gone.json", "properties": {}}), encoding="utf-8"
    )
    result = runner.invoke(app, ["contracts", "check", str(tmp_path)])
    assert result.exit_code == 1
    assert "changed: BetSettled.json" in result.output
    assert "BetSettled.legacy: field removed" in result.output
    assert "Gone: message type removed" in result.output
    assert f"punto-banco contracts export {tmp_path}" in result.output


def test_cli_export_removes_its_own_stale_schemas_but_not_other_files(tmp_path: Path) -> None:
    (tmp_path / "Gone.json").write_text(
        json.dumps({"$id": "punto-banco/contracts/Gone.json"}), encoding="utf-8"
    )
    (tmp_path / "mine.json").write_text("{}", encoding="utf-8")
    result = CliRunner().invoke(app, ["contracts", "export", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert not (tmp_path / "Gone.json").exists()
    assert (tmp_path / "mine.json").exists()


def test_cli_check_of_a_missing_directory_says_what_to_run(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["contracts", "check", str(tmp_path / "nope")])
    assert result.exit_code == 2
    assert "punto-banco contracts export" in result.output
