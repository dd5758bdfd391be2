"""Cells: the partitioned mode (``PB_PARTITIONED``), a host per owned partition.

N processes of a service share its partitions: each is a member of the service's consumer
group that only learns which partition numbers it owns, and runs a cell (the service itself on
``Settings.for_partition(n)``, its own store and writer lease) for each (docs/scaling.md).
"""

from services.shared.platform.cells.partitioned import (
    CellHost,
    merged_registry,
    run_partitioned,
    serve_partitioned,
)
