-- pinledger: online
-- A unique job's key and the index the fold of a keyed enqueue reads (decision 0037), as
-- Postgres's migrations/0015_jobs_unique_key.sql and 0016_jobs_by_key.sql. Built in
-- place while writes go on (ALGORITHM=INPLACE, LOCK=NONE: refused rather than locking).
ALTER TABLE jobs
    ADD COLUMN IF NOT EXISTS unique_key VARCHAR(255) NULL,
    ADD INDEX IF NOT EXISTS jobs_by_key (queue, `partition`, unique_key),
    ALGORITHM=INPLACE, LOCK=NONE;
