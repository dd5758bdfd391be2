"""Cells: the partitioned mode (``PB_PARTITIONED``), a host per owned partition
(``partitioned.py``; docs/scaling.md)."""

from services.shared.platform.cells.partitioned import (
    CellHost,
    merged_registry,
    serve_partitioned,
)
