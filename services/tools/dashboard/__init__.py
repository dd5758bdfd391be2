"""The live dashboard: a read model of every table fed from Kafka, served on loopback.

- ``roads``  the scoreboards (bead plate, big road, derived roads), pure;
- ``model``  the read model (contracts messages in, a JSON snapshot out), on the read
  side's views (``services.tools.history``, a bounded window of each table);
- ``panels`` each table as the page shows it: its views and the dashboard's counters;
- ``device`` a studio table's device: counters over its reads and holds;
- ``server`` the Kafka follower and the HTTP server (page, SSE, JSON);
- ``static/``                      the page: plain HTML, CSS and JavaScript, no build step.

It talks to the services only through :mod:`contracts` over Kafka: it never imports
services.shoe, services.dealing or services.settlement (an import-linter contract says so).
"""
