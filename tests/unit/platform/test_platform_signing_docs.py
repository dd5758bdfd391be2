"""The verification an integrator copies from docs/integrating.md agrees with the services'."""

from __future__ import annotations

import json
import re
from pathlib import Path
from types import SimpleNamespace
from typing import Any

from contracts import TABLE_EVENTS
from services.shared.platform.security import Where
from services.tools.admin.keys import keyring_json
from tests.unit.platform.keys_fakes import KEYRING, SIGNERS

GUIDE = Path(__file__).resolve().parents[3] / "docs" / "integrating.md"


def integrators_verify() -> Any:
    text = GUIDE.read_text(encoding="utf-8")
    section = text[text.index("## Signatures") :]
    [code] = re.findall(r"```python\n(.*?)```", section, re.DOTALL)[:1]
    scope: dict[str, Any] = {}
    exec(compile(code, str(GUIDE), "exec"), scope)  # the guide's own words
    return scope["verify"]


def test_the_guide_s_verify_accepts_the_relay_s_signature_and_refuses_changes() -> None:
    verify = integrators_verify()
    keyring = json.loads(keyring_json(KEYRING))
    value = b'{"type":"TableClosed"}'
    topic = "acme." + TABLE_EVENTS
    signature = SIGNERS["dealing"].sign(Where("cluster-A", topic, 2), b"t1", value, 12, 0)

    def record(**changed: Any) -> SimpleNamespace:
        fields: dict[str, Any] = {
            "topic": topic,
            "partition": 2,
            "key": b"t1",
            "value": value,
            "headers": [
                ("pb-source", b"dealing"),
                ("pb-notification-id", b"12"),
                ("pb-message-index", b"0"),
                ("pb-sig", signature),
            ],
        }
        fields.update(changed)
        return SimpleNamespace(**fields)

    assert verify(keyring, "dealing", "cluster-A", record())
    assert not verify(keyring, "dealing", "cluster-A", record(value=value + b" "))
    assert not verify(keyring, "dealing", "cluster-A", record(key=b"t2"))
    assert not verify(keyring, "shoe", "cluster-A", record())
    assert not verify(keyring, "dealing", "cluster-A", record(topic="acme.punto-banco.shoe-events"))
    assert not verify(keyring, "dealing", "cluster-A", record(topic=TABLE_EVENTS))  # prefix
    assert not verify(keyring, "dealing", "cluster-A", record(partition=1))
    assert not verify(keyring, "dealing", "cluster-B", record())
    moved = [*record().headers[:1], ("pb-notification-id", b"13"), *record().headers[2:]]
    assert not verify(keyring, "dealing", "cluster-A", record(headers=moved))
