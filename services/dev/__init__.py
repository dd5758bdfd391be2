"""Tools for developers, not part of the runtime wheel: the ``demo`` (`punto-banco up`), the
benchmarks (``bench``) and the local Kafka and PostgreSQL (``infra``). They run from a source
checkout (``make venv`` installs it editable with the ``dev`` extra)."""
