"""PinLater descriptors of imported jobs (docs/decisions/0017-imported-descriptors.md):
lookupJobs and getJobHistory accept them, answer about the job they became, and every
other descriptor still names a native job."""

from __future__ import annotations

from pinledger.idl import pinlater
from pinledger.ledger import codec
from pinledger.ledger.events import Actor, Enqueued, Envelope
from pinledger.service.testing.runtime import CALLER, TEST_CONFIG, Runtime, job

IMPORTER = Actor(source="pinlater-import", server="pinlater-import")


def test_the_codec_keeps_imported_from_and_leaves_other_enqueues_as_they_were() -> None:
    imported = Enqueued(b"x", 1, 0, 2, "", imported_from="mail:s1:p1:5")
    native = Enqueued(b"x", 1, 0, 2, "")
    for event in (imported, native):
        assert codec.decode(codec.encode(Envelope(1, IMPORTER, (event,)))).events == (event,)
    assert b'"i"' not in codec.encode(Envelope(1, IMPORTER, (native,)))


def test_lookup_and_history_accept_the_pinlater_descriptor_of_an_imported_job() -> None:
    with Runtime() as rt:
        node = rt.node()
        node.create_queue("mail")
        rt.wait_serving("mail", TEST_CONFIG.partitions, [node])
        # Partition 0's first records: an empty one (the importer's room, import_guard.py)
        # then the imported job, so its new local id is 1000, not PinLater's 5.
        rt.writer.append("mail", 0, (), rt.clock.now_ms(), IMPORTER)
        old = "mail:s9:p1:5"  # shard 9: a partition the queue does not have
        enqueued = Enqueued(b"moved", 1, rt.clock.now_ms(), 3, "from PinLater", imported_from=old)
        [new] = rt.writer.enqueue("mail", 0, [enqueued], rt.clock.now_ms(), IMPORTER)
        [native] = node.enqueue("mail", job(b"native"))
        rt.settle()

        info = node.lookup(old)
        assert info is not None
        assert info.jobDescriptor == str(new) == "mail:s0:p1:1000"
        assert (info.customStatus, info.attemptsAllowed) == ("from PinLater", 3)
        assert node.lookup(str(new)).jobDescriptor == str(new)
        assert node.lookup(native).jobDescriptor == native  # not in the map: native

        history = node.history(old)
        assert history.jobDescriptor == str(new)
        assert [step.action for step in history.steps] == ["Enqueued"]
        # An old descriptor that was never imported is still looked up natively.
        request = pinlater.PinLaterLookupJobRequest(jobDescriptors=["mail:s0:p1:5"])
        assert node.handler.lookupJobs(CALLER, request) == {}
