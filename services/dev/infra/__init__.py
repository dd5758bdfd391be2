"""Local infrastructure for development and tests: a Kafka broker and a PostgreSQL server.

`punto-banco infra up|down|status` (services/dev/cli/infra_cmd.py) drives the two
classes here, :class:`~services.dev.infra.kafka.KafkaBroker` and
:class:`~services.dev.infra.postgres.PostgresServer`. Both keep their data under the
project's data folder (``PB_DATA_DIR``, default ``./var``), listen on 127.0.0.1
(the broker's TLS listener, with ``PB_KAFKA_AUTH=scram``, where ``PB_KAFKA_TLS_HOST``
says), and can be started as extra throw-away instances in a temporary folder (the
test fixtures do that). The broker's authentication, TLS and ACLs: ``kafka_auth.py``
(listeners, users), ``kafka_tls.py`` (its CA), ``kafka_acls.py`` (the matrix),
``kafka_admin.py`` (the Admin API requests), ``kafka_principals.py``.
"""
