"""The one read side: tables, shoes, coups and bets rebuilt from the facts the services record.

- :mod:`~services.tools.history.views`  the views (History: tables, shoes, coups, bet books);
- :mod:`~services.tools.history.project` the Projector: one method per fact, into the views;
- :mod:`~services.tools.history.from_store` StoreFeed: stored rows (the audit);
- :mod:`~services.tools.history.from_messages` MessageFeed: contract messages on Kafka (the
  dashboard and the demo's ledger);
- :mod:`~services.tools.history.codes` one list of check codes (``Check``, ``Severity``) for
  the audit and the demo's ledger.

It builds its views from :mod:`services.shared.facts` and :mod:`contracts` alone: never the
services' code, the platform or eventsourcing (an import-linter contract says so).
"""

from services.tools.history.codes import Check, Severity
from services.tools.history.from_messages import MessageFeed
from services.tools.history.from_store import StoreFeed
from services.tools.history.project import Projector
from services.tools.history.views import History

__all__ = ["Check", "History", "MessageFeed", "Projector", "Severity", "StoreFeed"]
