"""createQueue, deleteQueue, getQueueNames: queues live in the catalog topic; these
wait (bounded) until the catalog projection and the owners have caught up."""

from __future__ import annotations

import logging

from pinledger.idl import pinlater
from pinledger.ledger.log import LogError
from pinledger.projections.catalog_log import catalog_envelopes, catalog_queues
from pinledger.service.api.core import Api
from pinledger.service.api.errors import pinlater_error
from pinledger.service.api.requests import Caller

log = logging.getLogger(__name__)

# Bounds of the waits after a create or delete: a rebalance takes seconds on a busy
# machine, so never less than this however small read_wait_s is.
_MIN_WAIT_S = 10.0
_CATALOG_POLL_S = 0.02
_OWNED_POLL_S = 0.05


def create_queue(api: Api, caller: Caller | None, name: str) -> None:
    if api.queues.get(name) is not None:
        return
    partitions = api.queue_config().settings(name).initial_partitions(api.config.partitions)
    created = api.writer.create_queue(name, partitions, api.clock.now_ms(), api.actor(caller))
    api.owner.add_queue(name)
    if not _wait_catalog(api, name, present=True) and not created:
        _orphan_topic(api, name)
    _wait_owned(api, name, partitions)


def _orphan_topic(api: Api, name: str) -> None:
    """The queue's topic existed, and no catalog record of the queue came: it is the
    topic of a queue of that name deleted moments ago (Kafka deletes topics in the
    background; a deletion may also have failed after its catalog record), or of a
    creation that failed between the topic and its record. The catalog read from the
    log tells: if it has the queue (another server created it, and the projection is
    behind), the queue exists. Else the topic is no queue's: it goes, and the caller
    retries (a success here would name a queue that does not exist)."""
    topic = api.writer.topic(name)
    try:
        if name in catalog_queues(catalog_envelopes(api.writer.log, api.writer.prefix)):
            return
    except LogError as exc:
        raise pinlater_error(
            pinlater.ErrorCode.SHARD_CONNECTION_FAILED,
            f"queue {name!r}: its topic exists and the catalog cannot be read to tell "
            f"whose it is ({exc}); retry createQueue",
        ) from exc
    try:
        api.writer.log.delete_topic(topic)
    except LogError as exc:
        log.warning("cannot delete topic %s left by an earlier queue %r: %s", topic, name, exc)
    raise pinlater_error(
        pinlater.ErrorCode.UNKNOWN,
        f"queue {name!r} cannot be created yet: its topic {topic} is left from a queue of "
        "that name deleted moments ago (Kafka deletes topics in the background) and is "
        "being deleted; retry createQueue in a few seconds",
    )


def check_admin_password(api: Api, password: str | None) -> None:
    admin = api.config.admin_password()
    if not admin.configured:
        raise pinlater_error(
            pinlater.ErrorCode.PASSWORD_INVALID,
            "no admin password is configured on this server "
            "(set PINLEDGER_ADMIN_PASSWORD_HASH; see `pinledger hash-password`)",
        )
    if not admin.check(password or ""):
        raise pinlater_error(pinlater.ErrorCode.PASSWORD_INVALID, "the admin password is wrong")


def delete_queue(api: Api, caller: Caller | None, name: str) -> None:
    """Deletes the queue (the password was checked before the name was read)."""
    if api.queues.get(name) is None:
        # Idempotent; a deletion whose topic removal failed after its catalog record is
        # finished by its retry.
        topic = api.writer.topic(name)
        if api.writer.log.existing([topic]):
            api.writer.log.delete_topic(topic)
        return
    api.writer.delete_queue(name, api.clock.now_ms(), api.actor(caller))
    _wait_catalog(api, name, present=False)


def queue_names(api: Api) -> set[str]:
    return api.queues.names()


def _wait_catalog(api: Api, name: str, present: bool) -> bool:
    """Wait (bounded) until getQueueNames shows the change; False when it did not. The
    change is in the log already, so running out of time is not an error: the queue
    takes (or refuses) jobs from its topic at once, and the name list follows."""
    deadline = api.clock.monotonic() + max(_MIN_WAIT_S, api.config.read_wait_s)
    while api.clock.monotonic() < deadline:
        api.queues.refresh()
        if (api.queues.get(name) is not None) == present:
            return True
        api.clock.sleep(_CATALOG_POLL_S)
    log.warning(
        "queue %r %s in the ledger; the catalog projection has not caught up yet",
        name,
        "created" if present else "deleted",
    )
    return False


def _wait_owned(api: Api, name: str, partitions: int) -> None:
    """Wait (bounded) until the new queue's partitions have owners that serve them, so
    a job enqueued and looked up right after createQueue is seen. The owners' group
    takes a rebalance, seconds on a busy machine, to hand a new topic out. Running out
    of time is not an error: the queue exists and will be served."""
    deadline = api.clock.monotonic() + max(_MIN_WAIT_S, api.config.read_wait_s)
    while api.clock.monotonic() < deadline:
        try:
            if api.owner.serves_all(name, partitions):
                return
        except LogError as exc:
            log.warning("cannot tell whether queue %r is owned yet: %s", name, exc)
        api.clock.sleep(_OWNED_POLL_S)
    log.warning("queue %r created; not every partition has a serving owner yet", name)
