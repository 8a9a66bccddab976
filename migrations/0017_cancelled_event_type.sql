-- pinledger: online
-- job_events.type takes 'cncl', the Cancelled event of cancelJobs (decision 0036). The
-- CHECK is widened without a long lock: the new one is added NOT VALID (no scan under
-- the ACCESS EXCLUSIVE lock the ALTER takes for a moment), then validated under a SHARE
-- UPDATE EXCLUSIVE lock, which lets writes go on. Every old row passes (the set only
-- grows). Servers older than this migration never write 'cncl'.
ALTER TABLE job_events
    DROP CONSTRAINT job_event_type,
    ADD CONSTRAINT job_event_type CHECK
        (type IN ('enq', 'clm', 'ok', 'fail', 'ckpt', 'tmo', 'rtry', 'del', 'gc', 'cncl'))
        NOT VALID;
ALTER TABLE job_events VALIDATE CONSTRAINT job_event_type;
