"""Regulatory replay: audit, game recall and read models, from the event stores alone.

The auditor reads each service's notification log straight from its store
(``stores``: SQLite files or PostgreSQL schemas, as the services' settings place
them; never Kafka), verifies each store's seal chain (``seals``, over the seals
``services.shared.platform.store.sealing`` records), rebuilds every shoe, coup and bet book
from the stored events' own fields with the read side (``services.tools.history``: the
fact records of ``services.shared.facts`` read by ``from_store.StoreFeed`` into its
views; ``model`` and ``decode`` re-export them) and checks them with the rules engine
(``checks``, one module per thing checked: commitments, cards by position, the tableau,
results, acceptance, payouts by paytable and rounding, refunds, the two services' views;
``totals``: money per coup, shoe, table and day). ``auditor.audit``
runs it all (in two processes for big stores) and returns an ``AuditReport``
(``report``: text, JSON, HTML). ``recall`` and ``read_models`` use the same
rebuilt history. Nothing here imports the services' code (histories to audit are
played by ``services.dev.simulation``, for the tests and ``bench``).

CLI: ``punto-banco audit | recall | replay`` (``services/tools/cli/audit_cmd.py``).
"""
