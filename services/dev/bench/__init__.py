"""End-to-end benchmarks of the running system (``punto-banco bench --only e2e``).

- :mod:`services.dev.bench.stats`: percentiles and rates (pure).
- :mod:`services.dev.bench.report`: figures, the machine and versions, the Markdown details (pure
  formatting plus a few read-only probes).
- :mod:`services.dev.bench.cluster`: the three services as ``punto-banco serve`` subprocesses of one
  run (own topic prefix, data folder and PostgreSQL schemas), with resident-memory sampling.
- :mod:`services.dev.bench.driver`: the load driver (opens tables, floods PlaceBet, closes betting,
  follows the event topics and times each coup).
- :mod:`services.dev.bench.ceilings`: raw aiokafka produce-and-consume and raw event-store appends,
  measured in the same run as the pipeline.
- :mod:`services.dev.bench.e2e`: the ``e2e`` group (the matrix, the ceilings, the memory).
"""
