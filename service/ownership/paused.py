"""Partitions paused at a record no store commits or no release decodes (decision 0032).

A store that refuses a batch (a plain StoreError: a refusal that would fail again the
same way, such as Postgres refusing a NUL in text; not StoreUnavailableError, which the
server retries as a whole) or a record the codec cannot read stops only the record's own
partition; the server's other partitions go on projecting and serving in the same pass.

- **Narrowing**: a batch of many records failed, so its partition is adopted again from
  the store (its ready buffer was told the batch before the commit: decision 0020) and
  projects the failed batch's records one per commit (`narrow`), so that the records
  before the bad one are projected and the pause names its exact offset.
- **Paused**: the partition is dropped (not served, not projected, not watched for
  lag), logged once with the offset, the store's or the codec's words and the command
  that skips the record, exported as `pinledger_partition_paused{queue,partition}` and
  named by `/ready`. It is tried again by itself every `RETRY_FIRST_S`, doubling to
  `RETRY_MAX_S` (a refusal may not be permanent: a column widened, a constraint fixed),
  and at once when a skip of its record is projected (seen in this server's catalog
  projection, or in its store every `SKIP_CHECK_S` when another server owns the
  catalog); it resumes, with one line, once its projection passes the offset.

State: the owner thread's alone, except `paused`, replaced whole on each change and
read by other threads (the admin port's /ready) without a lock.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, replace
from types import MappingProxyType

from pinledger.ledger.log import PartitionKey
from pinledger.service.observability import catalogue
from pinledger.service.observability.metrics import Metrics

log = logging.getLogger(__name__)

Key = PartitionKey

# How long a paused partition waits before it is tried again: doubling from the first
# to the most.
RETRY_FIRST_S = 5.0
RETRY_MAX_S = 60.0
# How often a paused partition's store is asked whether its record was skipped: the
# catalog's owner, which projects the skip, may be another server.
SKIP_CHECK_S = 2.0
# How much of the store's or the codec's words a log line and /ready hold.
WHY_CHARS = 300
PAUSED_GAUGE = catalogue.PARTITION_PAUSED


@dataclass(frozen=True, slots=True)
class Paused:
    """A partition stopped before the record at `offset`."""

    queue: str
    partition: int
    offset: int
    # The store's refusal or the decode error, on one line, bounded.
    why: str
    # Monotonic time of the next try, and the wait after it fails again.
    retry_at: float
    delay_s: float

    @property
    def command(self) -> str:
        """The operator's command that skips the record."""
        return (
            f"pinledger skip-record --queue {self.queue} --partition {self.partition} "
            f"--offset {self.offset} --reason '...'"
        )

    def describe(self) -> str:
        """What /ready says of it."""
        return f"paused at offset {self.offset}: {self.why}; skip the record: {self.command}"


def one_line(exc: BaseException) -> str:
    """An error in a few words: its type and message, whitespace folded, bounded."""
    said = re.sub(r"\s+", " ", f"{type(exc).__name__}: {exc}").strip()
    return said if len(said) <= WHY_CHARS else said[: WHY_CHARS - 3] + "..."


class Pauses:
    def __init__(self, metrics: Metrics, monotonic: Callable[[], float]) -> None:
        self.metrics = metrics
        self.monotonic = monotonic
        # Paused partitions; replaced whole (other threads read it without a lock).
        self.paused: Mapping[Key, Paused] = MappingProxyType({})
        # Partitions projecting one record per commit, up to (excluding) this offset.
        self._narrowing: dict[Key, int] = {}
        # When each paused partition's store was last asked for its skips.
        self._checked: dict[Key, float] = {}

    # -- narrowing -------------------------------------------------------------------

    def narrowing(self, key: Key) -> int | None:
        """The offset up to which `key` projects one record per commit, or None."""
        return self._narrowing.get(key)

    def narrow(self, key: Key, first: int, until: int, exc: BaseException) -> None:
        """A batch of `key`'s records in [first, until) was refused: project them one
        per commit to find the one."""
        self._narrowing[key] = max(until, self._narrowing.get(key, until))
        if key in self.paused:
            return  # already said
        log.info(
            "%s[%d]: the batch of offsets %d..%d was refused (%s); projecting it one record "
            "per commit to find the record",
            key[0],
            key[1],
            first,
            until - 1,
            one_line(exc),
        )

    # -- pausing and resuming --------------------------------------------------------

    def pause(self, key: Key, queue: str, offset: int, exc: BaseException) -> None:
        """`key` stops before the record at `offset`, which its store refused or no
        release decodes: logged once (again only for another offset), tried again
        later."""
        self._narrowing.pop(key, None)
        before = self.paused.get(key)
        now = self.monotonic()
        if before is not None and before.offset == offset:
            delay = min(before.delay_s * 2, RETRY_MAX_S)
            paused = replace(before, why=one_line(exc), retry_at=now + delay, delay_s=delay)
        else:
            delay = RETRY_FIRST_S
            paused = Paused(queue, key[1], offset, one_line(exc), now + delay, delay)
            log.warning(
                "%s[%d] (queue %s) paused at offset %d: %s; this server's other partitions go "
                "on. Fix the cause (it is tried again every %.0f s to %.0f s), or skip the "
                "record: %s",
                key[0],
                key[1],
                queue,
                offset,
                paused.why,
                RETRY_FIRST_S,
                RETRY_MAX_S,
                paused.command,
            )
        self.paused = MappingProxyType({**self.paused, key: paused})
        self.metrics.set_gauge(PAUSED_GAUGE, 1.0, queue=queue, partition=str(key[1]))

    def projected(self, key: Key, next_offset: int, skipped: Mapping[int, str]) -> None:
        """`key`'s projection has reached `next_offset`: the end of its narrowing, or of
        its pause (`skipped`: the records an operator skipped, for the line that says
        why it resumed)."""
        until = self._narrowing.get(key)
        if until is not None and next_offset >= until:
            del self._narrowing[key]
            if key not in self.paused:
                log.info(
                    "%s[%d]: every record up to offset %d committed one at a time; the "
                    "refusal did not recur",
                    key[0],
                    key[1],
                    until - 1,
                )
        paused = self.paused.get(key)
        if paused is None or next_offset <= paused.offset:
            return
        how = (
            f"an operator skipped it ({skipped[paused.offset] or 'no reason given'})"
            if paused.offset in skipped
            else "the store committed it"
        )
        log.info(
            "%s[%d] (queue %s) resumed past offset %d: %s",
            key[0],
            key[1],
            paused.queue,
            paused.offset,
            how,
        )
        self._remove(key)

    def due(self) -> list[Key]:
        """The paused partitions whose next try has come."""
        now = self.monotonic()
        return sorted(key for key, p in self.paused.items() if p.retry_at <= now)

    def to_check(self) -> list[Paused]:
        """The paused partitions whose store is due to be asked whether their record was
        skipped (every SKIP_CHECK_S each)."""
        now = self.monotonic()
        due = []
        for key, paused in sorted(self.paused.items()):
            if now - self._checked.get(key, now - SKIP_CHECK_S) >= SKIP_CHECK_S:
                self._checked[key] = now
                due.append(paused)
        return due

    def retrying(self, key: Key) -> None:
        """`key` is adopted again for a try: its paused record alone first."""
        paused = self.paused.get(key)
        if paused is not None:
            self._narrowing[key] = max(paused.offset + 1, self._narrowing.get(key, 0))

    def try_now(self, key: Key) -> bool:
        """Try `key` again at once (a skip of one of its records was projected): the
        waits start over. False when it is not paused."""
        paused = self.paused.get(key)
        if paused is None:
            return False
        now = self.monotonic()
        changed = replace(paused, retry_at=now, delay_s=RETRY_FIRST_S / 2)
        self.paused = MappingProxyType({**self.paused, key: changed})
        return True

    def keep_only(self, keys: Iterable[Key]) -> None:
        """Forget the partitions no longer assigned here (their new owner pauses them
        in turn, if it must)."""
        kept = set(keys)
        for key in [k for k in {*self.paused, *self._narrowing} if k not in kept]:
            self.forget(key)

    def forget(self, key: Key) -> None:
        """`key` is no longer this server's (revoked, or its queue deleted)."""
        self._narrowing.pop(key, None)
        if key in self.paused:
            self._remove(key)

    def _remove(self, key: Key) -> None:
        self._checked.pop(key, None)
        paused = self.paused[key]
        self.paused = MappingProxyType({k: p for k, p in self.paused.items() if k != key})
        self.metrics.set_gauge(
            PAUSED_GAUGE, 0.0, queue=paused.queue, partition=str(paused.partition)
        )

    def described(self) -> dict[str, str]:
        """Each paused partition ("queue[partition]") and what to do about it (/ready)."""
        return {f"{p.queue}[{p.partition}]": p.describe() for p in self.paused.values()}
