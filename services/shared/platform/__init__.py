"""The shared runtime of the punto-banco services, in six parts over a small foundation.

``settings`` (every setting, read once), ``kafka`` (clients, topics, the partitioner) and
``logs``; then ``security``, ``store``, ``consumer`` and ``relay``, ``host`` and ``cells``,
each used through its package (docs/architecture.md).
"""
