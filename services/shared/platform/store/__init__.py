"""The store: a service's eventsourcing Application and what it writes in one transaction.

Events, tracking records and side rows are recorded together (:class:`UnitOfWork`); one writer
per store (:func:`writer_lease`, fenced on PostgreSQL); every Application call runs on one
thread (:class:`AppWorker`); the notification log is sealed in a hash chain (:func:`seal_store`);
refused facts become incidents (:func:`raise_incident`). What ``punto-banco db setup`` provisions
a store with (``services/tools/admin/provisioning.py``) is named here too.
"""

from services.shared.platform.store.application import (
    LOCK_PROCEDURE,
    AppWorker,
    ServiceApplication,
    UnitOfWork,
    open_application,
    prepare_store,
    watch_worker,
)
from services.shared.platform.store.incidents import (
    Evidence,
    Origin,
    raise_incident,
    refuse_fact,
)
from services.shared.platform.store.lease import (
    LEASE_TABLES,
    StoppedAsStandby,
    WriterLease,
    lease_tables_statements,
    writer_lease,
)
from services.shared.platform.store.sealing import (
    FINGERPRINT_BYTES,
    LEDGER_ID,
    MAX_ROWS_PER_ROUND,
    SEALED_TOPIC,
    STARTED_TOPIC,
    ZERO_DIGEST,
    Sealer,
    SealLedger,
    seal_digest,
    seal_store,
)
from services.shared.platform.store.side_tables import (
    BET_IDS,
    REFUSED_COMMANDS,
    Row,
    SideRows,
    SideTable,
    create_side_tables,
    fill_from_history,
    select_rows,
)
