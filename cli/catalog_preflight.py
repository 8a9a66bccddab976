"""What an operator's command that appends to the catalog checks first, against the
catalog as the log holds it (`pinledger queue pause|resume`, `pinledger skip-record`):
a reason that fits, a catalog under the prefix, a cluster whose ledger format has the
record, and the queue. One place, so the commands refuse alike and say the same."""

from __future__ import annotations

from pinledger.ledger import formats
from pinledger.ledger.log import Log, catalog_topic
from pinledger.projections.catalog_log import catalog_envelopes, catalog_queues
from pinledger.projections.skips import REASON_CHARS
from pinledger.projections.store import QueueRow


def preflight(
    log: Log,
    prefix: str,
    queue: str,
    reason: str,
    needed: int,
    what: str,
    refused: type[ValueError],
) -> tuple[int, QueueRow]:
    """The cluster's ledger format and the queue's row; raises `refused` saying why and
    what to do when the command cannot go on. `what` names the record ("pausing or
    resuming a queue"), `needed` the format that has it."""
    if "\x00" in reason or len(reason) > REASON_CHARS:
        raise refused(f"give a --reason of at most {REASON_CHARS} characters, no NUL")
    if not log.existing([catalog_topic(prefix)]):
        raise refused(f"no catalog under the prefix {prefix!r}: check PINLEDGER_TOPIC_PREFIX")
    envelopes = catalog_envelopes(log, prefix)
    cluster = formats.folded(formats.PLAIN, (e for v in envelopes for e in v.events))
    if cluster < needed:
        raise refused(
            f"{what} needs ledger format {needed}; the cluster writes format {cluster}: run "
            "`pinledger upgrade-format` once every server runs a release that reads it"
        )
    row = catalog_queues(envelopes).get(queue)
    if row is None:
        raise refused(f"no queue {queue!r} in the catalog (prefix {prefix!r})")
    return cluster, row
