"""Local infrastructure for development and tests: a Kafka broker and a PostgreSQL server.

`punto-banco infra up|down|status` (services/dev/cli/infra_cmd.py) drives the two
classes here, :class:`~services.dev.infra.kafka.KafkaBroker` and
:class:`~services.dev.infra.postgres.PostgresServer`. Both keep their data under the
project's data folder (``PB_DATA_DIR``, default ``./var``), listen on 127.0.0.1
only, and can be started as extra throw-away instances in a temporary folder (the
test fixtures do that).
"""
