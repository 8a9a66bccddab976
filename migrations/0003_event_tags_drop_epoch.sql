-- pinledger: pause "rewrites the type of every job_events row and checks four new CHECKs under locks that stop writes to job_events; servers older than it write type names the new CHECK refuses"
-- job_events.type holds the codec's event tag (ledger/codec.py EVENT_TAGS), the one
-- name of an event type outside Python, instead of the Python class name; the unused
-- partition_offsets.epoch goes (docs/decisions/0010-epoch-and-event-tags.md); CHECKs
-- mirror more of ledger/state.py.

UPDATE job_events SET type = CASE type
    WHEN 'Enqueued' THEN 'enq'
    WHEN 'Claimed' THEN 'clm'
    WHEN 'Succeeded' THEN 'ok'
    WHEN 'Failed' THEN 'fail'
    WHEN 'Checkpointed' THEN 'ckpt'
    WHEN 'TimedOut' THEN 'tmo'
    WHEN 'Retried' THEN 'rtry'
    WHEN 'Deleted' THEN 'del'
    WHEN 'Collected' THEN 'gc'
END
WHERE type IN ('Enqueued', 'Claimed', 'Succeeded', 'Failed', 'Checkpointed', 'TimedOut',
               'Retried', 'Deleted', 'Collected');

ALTER TABLE job_events
    ADD CONSTRAINT job_event_type CHECK
        (type IN ('enq', 'clm', 'ok', 'fail', 'ckpt', 'tmo', 'rtry', 'del', 'gc')),
    ADD CONSTRAINT state_after_known CHECK (state_after BETWEEN 0 AND 3),
    ADD CONSTRAINT job_after_together CHECK
        ((state_after IS NULL) = (attempts_remaining_after IS NULL)),
    ADD CONSTRAINT applied_iff_verdict CHECK (applied = (verdict = 'applied'));

ALTER TABLE partition_offsets DROP COLUMN epoch;
