import json

from typer.testing import CliRunner

from contracts import TOPIC_MESSAGES
from services.shared.platform.asyncapi import SYSTEM, asyncapi_json
from services.tools.cli.main import app


def test_the_document_names_every_topic_and_message() -> None:
    document = json.loads(asyncapi_json())
    addresses = {channel["address"] for channel in document["channels"].values()}
    assert addresses == set(TOPIC_MESSAGES)
    schemas = document["components"]["schemas"]
    for models in TOPIC_MESSAGES.values():
        for model in models:
            assert model.__name__ in schemas


def test_every_topic_is_consumed_or_published_by_someone() -> None:
    consumed = {t for s in SYSTEM.values() for t in s.consumes}
    published = {t for s in SYSTEM.values() for t in s.publishes}
    assert consumed | published == set(TOPIC_MESSAGES)


def test_cli_writes_the_document(tmp_path: object) -> None:
    from pathlib import Path

    out = Path(str(tmp_path)) / "asyncapi.json"
    result = CliRunner().invoke(app, ["asyncapi", "--output", str(out)])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["asyncapi"] == "3.0.0"
