-- pinledger: online
-- job_events.type takes 'cncl', the Cancelled event of cancelJobs (decision 0036).
-- MariaDB cannot add a CHECK without copying the table under a lock that stops writes
-- (it refuses LOCK=NONE for it), so the CHECK of the type is dropped, which it does in
-- place without a lock: the projection writes only the codec's tags (ledger/codec.py
-- EVENT_TAGS), and the codec refuses any other when it decodes a record.
ALTER TABLE job_events DROP CONSTRAINT job_event_type, ALGORITHM=INPLACE, LOCK=NONE;
