"""The audit's checks over a rebuilt history, one module per thing checked.

Everything that can be recomputed is recomputed with ``services.shared.rules`` and compared
with what the stores say: the commitment from the revealed order and salt, every card
from its position in the revealed order (``shoes``), who gets each card from the tableau
and totals/natural/outcome/pairs from the cards (``coups``), each accepted bet against the
table's terms (``acceptance``), every payout from the table's paytable and rounding rule
(``settlements``), refunds of voided coups (``refunds``), the two services' views of each
coup and the money totals (``books``). Nothing the services recorded as a *result* is
trusted. ``checker.Checker`` runs them in order; ``context`` is what they share.
"""

from services.tools.audit.checks.checker import Checker
from services.tools.audit.checks.filters import Filters

__all__ = ["Checker", "Filters"]
