"""The demo behind `punto-banco up`: simulated bettors, an independent ledger, the live view.

- :mod:`services.dev.demo.bettors` plans the bets of a crowd (valid and, with wildness, bad ones);
- :mod:`services.dev.demo.ledger` tracks what was sent, accepted, rejected, settled and refunded;
  :mod:`services.dev.demo.checks` checks it, recomputing each settlement from the cards with
  :mod:`services.shared.rules` (:mod:`services.dev.demo.records` holds its records);
- :mod:`services.dev.demo.bus` sends commands and follows event topics (aiokafka + contracts);
- :mod:`services.dev.demo.processes` and :mod:`services.dev.demo.system` run the three services as
  `punto-banco serve X` children and follow their events (also used by the e2e tests);
- :mod:`services.dev.demo.orchestrator` starts Kafka (and PostgreSQL), the services, drives the
  tables and stops everything;
- :mod:`services.dev.demo.live` renders the live view and the final summary.

The demo talks to the services only through :mod:`contracts` over Kafka: it never imports
services.shoe, services.dealing, services.settlement or services.shared.platform.
"""
