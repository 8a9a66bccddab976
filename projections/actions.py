"""The names of a timeline row's event: the codec's tag, which job_events.type stores
(ledger/codec.py EVENT_TAGS), and the action name people and the wire see (the event
type's name, "Enqueued")."""

from __future__ import annotations

from pinledger.ledger import events as ev
from pinledger.ledger.codec import EVENT_TAGS

# The job event types by tag.
EVENT_TYPES: dict[str, type] = {
    EVENT_TAGS[cls]: cls
    for cls in (
        ev.Enqueued,
        ev.Claimed,
        ev.Succeeded,
        ev.Failed,
        ev.Checkpointed,
        ev.TimedOut,
        ev.Retried,
        ev.Deleted,
        ev.Collected,
        ev.Cancelled,
    )
}
_TAG_OF_ACTION = {cls.__name__: tag for tag, cls in EVENT_TYPES.items()}


class Tag:
    """The tags of the job events, by name (for `match`)."""

    ENQUEUED = EVENT_TAGS[ev.Enqueued]
    CLAIMED = EVENT_TAGS[ev.Claimed]
    SUCCEEDED = EVENT_TAGS[ev.Succeeded]
    FAILED = EVENT_TAGS[ev.Failed]
    CHECKPOINTED = EVENT_TAGS[ev.Checkpointed]
    TIMED_OUT = EVENT_TAGS[ev.TimedOut]
    RETRIED = EVENT_TAGS[ev.Retried]
    DELETED = EVENT_TAGS[ev.Deleted]
    COLLECTED = EVENT_TAGS[ev.Collected]
    CANCELLED = EVENT_TAGS[ev.Cancelled]


def action_of(tag: str) -> str:
    """What a step did, as people and the wire name it (the event type's name, e.g.
    "Enqueued"), for a timeline row's tag; an unknown tag is shown as it is."""
    cls = EVENT_TYPES.get(tag)
    return tag if cls is None else cls.__name__


def tag_of_action(action: str) -> str:
    """The tag of an action name (the inverse of `action_of`)."""
    return _TAG_OF_ACTION.get(action, action)
