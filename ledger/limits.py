"""The strings a request can carry into the log or a store: how long each may be, and the
characters none may hold. One table, read by the Thrift edge (service/api/requests.py
refuses), the decisions (ledger/commands.py truncates), the importer and the server's
configuration; tests/unit/test_limits.py holds the worst case of every column these
strings reach against both dialects' schemas (projections/pg/schema.sql,
projections/mysql/schema.sql).

The rules, and why:

- **NUL (U+0000)** is refused: Postgres holds it in neither text nor jsonb ("text fields
  cannot contain NUL"), so a record carrying one could never be projected there and
  its partition's owner would fail on it for good. MariaDB stores it, but a log must
  replay into either store. (A checkpoint's newBody may hold NUL: it becomes the job's
  body, bytes in a bytea/LONGBLOB column.)
- **Text that is not UTF-8** is refused: an unpaired surrogate (U+D800..U+DFFF) in a
  `str` (neither the codec nor a driver can encode one), or, on the wire, bytes that
  do not decode (thriftpy2 then hands the field over as `bytes`).
- **Lengths** are counted in characters. MariaDB's TEXT holds 65,535 bytes and utf8mb4
  spends up to 4 a character; a verdict quotes two sources (by repr, up to 10 bytes a
  character: '\\U000e0001') and a claim, and a claim holds a server id and a source:
  `column_extents()` gives the worst case of each column, which the test holds below
  the narrower of the two schemas.
- **customStatus and its append/prepend** keep PinLater's behaviour: longer than 5000
  characters is truncated, not refused (ledger/state.py `cap_status`); a NUL in them is
  refused all the same.

The checks run on every enqueue, so they are cheap: `"\\x00" in s` is a memchr, and a
surrogate scan runs only on text that is not ASCII (`str.isascii()` reads a flag).
"""

from __future__ import annotations

from dataclasses import dataclass

from pinledger.ledger.descriptor import MAX_NUMBER_DIGITS, MAX_QUEUE_NAME_LENGTH

# PinLater truncated custom status at 5000 characters rather than refusing it.
MAX_CUSTOM_STATUS = 5000


@dataclass(frozen=True, slots=True)
class TextRule:
    """What one string field may hold. `name` is the field as the IDL (or the setting)
    names it, so a refusal names what the caller sent."""

    name: str
    # None: bounded elsewhere (newBody: PINLEDGER_MAX_BODY_BYTES, in bytes).
    max_chars: int | None
    # Longer text is cut to max_chars instead of refused (PinLater's custom status).
    truncate: bool = False
    # NUL allowed: the text becomes bytes in a binary column.
    nul_allowed: bool = False


def problem(rule: TextRule, value: object) -> str | None:
    """What is wrong with `value` as `rule`'s field, as the end of a sentence naming it;
    None when it is fine. A caller says "<where><rule.name> <problem>"."""
    if not isinstance(value, str):
        if isinstance(value, bytes | bytearray):
            return "is not valid UTF-8 (a Thrift string must be): send UTF-8 text"
        return f"must be a str, got {shown(value)}"
    if not rule.nul_allowed and "\x00" in value:
        return (
            f"contains NUL (\\x00) at character {value.index(chr(0))}, which Postgres cannot store"
        )
    if not value.isascii() and _has_surrogate(value):
        return "contains an unpaired surrogate (U+D800..U+DFFF): it is not UTF-8 text"
    if rule.max_chars is not None and not rule.truncate and len(value) > rule.max_chars:
        return f"is {len(value)} characters, the limit is {rule.max_chars}"
    return None


def _has_surrogate(value: str) -> bool:
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return True
    return False


def shown(value: object, chars: int = 60) -> str:
    """`value` quoted for a message, cut to about `chars` characters: an error never
    echoes a megabyte back."""
    text = repr(value)
    if len(text) <= chars:
        return text
    size = len(value) if isinstance(value, str | bytes | bytearray) else None
    return f"{text[:chars]}... ({size} in all)" if size is not None else f"{text[:chars]}..."


# -- the table -------------------------------------------------------------------------

MAX_SOURCE_CHARS = 1024
MAX_REQUEST_ID_CHARS = 1024
MAX_SERVER_ID_CHARS = 320
MAX_IMPORTED_DESCRIPTOR_CHARS = 400
# A claim descriptor: server:started_ms:source:counter (service/ownership/claims.py),
# its numbers at most 20 digits each.
MAX_CLAIM_CHARS = MAX_SERVER_ID_CHARS + MAX_SOURCE_CHARS + 2 * 20 + 3

# RequestContext: who asked. Goes to every record's actor (job_events.source,
# request_id), to jobs.claim_source and into claim descriptors and verdicts.
SOURCE = TextRule("source", MAX_SOURCE_CHARS)
REQUEST_ID = TextRule("requestId", MAX_REQUEST_ID_CHARS)
# Custom status: jobs.custom_status and the events' detail.
CUSTOM_STATUS = TextRule("customStatus", MAX_CUSTOM_STATUS, truncate=True)
APPEND_STATUS = TextRule("appendCustomStatus", MAX_CUSTOM_STATUS, truncate=True)
PREPEND_STATUS = TextRule("prependCustomStatus", MAX_CUSTOM_STATUS, truncate=True)
# cancelJobs' reason, which the job's custom status takes after "cancelled by <source>: ".
CANCEL_REASON = TextRule("reason", MAX_CUSTOM_STATUS, truncate=True)
# A checkpoint's new body, a Thrift string encoded to UTF-8: the body's bytes.
NEW_BODY = TextRule("newBody", None, nul_allowed=True)
# Reads: query parameters, never stored, but Postgres refuses NUL in them too.
BODY_REGEX = TextRule("bodyRegexToMatch", 4096)
# run_after.partition.local_id: at most 20 + 10 + 19 digits and two dots.
CONTINUATION = TextRule("continuation", 64)
# queue:s<partition>:p<priority>:<local_id>, each number at most 19 digits.
JOB_DESCRIPTOR = TextRule(
    "jobDescriptor", MAX_QUEUE_NAME_LENGTH + 3 * MAX_NUMBER_DIGITS + len(":s:p:")
)
# Queue names are ASCII letters, digits and '_' (ledger/descriptor.py): checked there.
QUEUE_NAME = TextRule("queueName", MAX_QUEUE_NAME_LENGTH)
# deleteQueue's admin password: hashed, never stored.
PASSWORD = TextRule("password", 1024)
# Not from a request: the server's id (PINLEDGER_SERVER_ID, default host:pid, a host
# name of up to 253 characters) is in every record it appends (job_events.server) and
# every claim it makes; checked when the configuration is read.
SERVER_ID = TextRule("server_id", MAX_SERVER_ID_CHARS)
# Written by `pinledger import-pinlater` from a PinLater deployment: the PinLater
# descriptor (imported_descriptors.old_descriptor is a VARCHAR(400) on MariaDB) and
# the claim descriptor of a job PinLater had in progress.
# A unique job's key (decision 0037): jobs.unique_key is a VARCHAR(255) on MariaDB,
# indexed with the queue name and the partition.
MAX_UNIQUE_KEY_CHARS = 255
UNIQUE_KEY = TextRule("uniqueKey", MAX_UNIQUE_KEY_CHARS)
IMPORTED_DESCRIPTOR = TextRule("PinLater job descriptor", MAX_IMPORTED_DESCRIPTOR_CHARS)
IMPORTED_CLAIM = TextRule("PinLater claim descriptor", MAX_CLAIM_CHARS)

# The largest retry delay an ack may ask: run_after = now + delay must stay a bigint
# (a larger one would make the projection refuse the record for good). A century.
MAX_RETRY_DELAY_MS = 100 * 365 * 86_400_000

# -- the columns they reach -------------------------------------------------------------

# Bytes a character can take: in UTF-8, in repr() (a non-printable astral character is
# '\U000e0001'), and in JSON (a control character is \u001f).
UTF8_BYTES = 4
REPR_BYTES = 10
JSON_BYTES = 6
# The fixed words of the longest rejection reason (ledger/state.py `_fence`):
# "rejected: failure ack: from '', but job is claimed by '' under ".
_VERDICT_WORDS = 80
# The keys, numbers and punctuation of an event's detail (projections/timeline_rows.py).
_DETAIL_WORDS = 400


@dataclass(frozen=True, slots=True)
class Extent:
    """The most a column can be asked to hold: characters, and UTF-8 bytes."""

    chars: int
    bytes: int


def _text(chars: int) -> Extent:
    return Extent(chars, chars * UTF8_BYTES)


def column_extents() -> dict[str, Extent]:
    """Every column a request's string reaches, "table.column", and the worst case it
    must hold under the table above."""
    source, server = MAX_SOURCE_CHARS, MAX_SERVER_ID_CHARS
    queue = Extent(MAX_QUEUE_NAME_LENGTH, MAX_QUEUE_NAME_LENGTH)  # ASCII
    claim = Extent(MAX_CLAIM_CHARS, (server + source) * UTF8_BYTES + 2 * 20 + 3)
    # "<words> <repr(source)> <repr(claim source)> <claim>": the sources quoted by repr.
    quoted = 2 * (source * REPR_BYTES + 2)
    verdict = Extent(_VERDICT_WORDS + quoted + claim.chars, _VERDICT_WORDS + quoted + claim.bytes)
    # An event's strings (Enqueued: status and PinLater descriptor; Checkpointed and
    # acks: status and claim), each escaped in JSON.
    detail_chars = MAX_CUSTOM_STATUS + max(MAX_IMPORTED_DESCRIPTOR_CHARS, MAX_CLAIM_CHARS)
    detail_bytes = _DETAIL_WORDS + detail_chars * JSON_BYTES
    detail = Extent(detail_bytes, detail_bytes)
    return {
        "queues.name": queue,
        "jobs.queue": queue,
        "jobs.custom_status": _text(MAX_CUSTOM_STATUS),
        "jobs.claim": claim,
        "jobs.claim_source": _text(source),
        "job_events.queue": queue,
        "job_events.source": _text(source),
        "job_events.request_id": _text(MAX_REQUEST_ID_CHARS),
        "job_events.server": _text(server),
        "job_events.claim": claim,
        "job_events.verdict": verdict,
        "job_events.detail": detail,
        "imported_descriptors.queue": queue,
        "imported_descriptors.old_descriptor": _text(MAX_IMPORTED_DESCRIPTOR_CHARS),
    }
