"""Local infrastructure for development and tests: a Kafka broker and a PostgreSQL server.

`punto-banco infra up|down|status|credentials|kafka-script` (services/dev/cli/infra_cmd.py)
drives :class:`~services.dev.infra.kafka.KafkaBroker` and
:class:`~services.dev.infra.postgres.PostgresServer`. Both keep their data under the project's
data folder (``PB_DATA_DIR``, default ``./var``), listen on 127.0.0.1 (the broker's TLS listener
where ``PB_KAFKA_TLS_HOST`` says), and can be started as extra throw-away instances in a
temporary folder (the test fixtures do that).

- ``kafka.py``: the broker (KRaft, from Maven Central's jars); ``kafka_auth.py`` its listeners,
  SASL/SCRAM and authorizer settings; ``kafka_tls.py`` its CA and certificate.
- ``kafka_acls.py``: who may do what (the ACL matrix, from ``contracts``) and the gateways'
  quota; ``kafka_principals.py`` grants them, ``kafka_admin.py`` sends the Admin API requests;
  ``kafka_setup_script.py`` renders the same for a cluster's own tools.
- ``kafka_clients.py``: how the developer tools (demo, bench, tests) log in.
- ``postgres.py``: the PostgreSQL cluster and the services' roles.
- ``programs.py`` (Java, the jars, PostgreSQL's programs), ``processes.py``, ``ports.py``,
  ``common.py`` (errors, folders, state and secret files).
"""
