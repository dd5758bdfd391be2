"""A void's replay refused after a restart, on a durable store."""

from __future__ import annotations

from services.dealing.application import DealingApplication
from tests.supervisors import keyring, supervisor
from tests.unit.dealing.harness import Driver, ScriptedShoe, open_table, shuffled_order
from tests.unit.dealing.test_dealing_voids import current_coup, refused


def test_a_replay_is_refused_after_a_restart(store_env: dict[str, str]) -> None:
    first = DealingApplication(env=store_env, supervisors=keyring())
    driver = Driver(first, ScriptedShoe([shuffled_order(1, seed=3)]))
    first.handle(open_table(betting_window_ms=60_000))
    driver.pump()
    void = supervisor().void("t1", current_coup(driver), "misdeal")
    first.handle(void)
    driver.pump()
    first.close()
    driver.app = DealingApplication(env=store_env, supervisors=keyring())
    refused(driver, void, "AUTHORIZATION_REPLAYED")
    driver.app.close()
