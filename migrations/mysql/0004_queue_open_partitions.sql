-- pinledger: online
-- How many of a queue's partitions take new jobs, as Postgres's
-- migrations/0009_queue_open_partitions.sql. A nullable column added in place
-- (ALGORITHM=INSTANT, LOCK=NONE: refused rather than locking): no table copy.
ALTER TABLE queues ADD COLUMN IF NOT EXISTS open_partitions INT NULL CHECK (open_partitions > 0),
    ALGORITHM=INSTANT, LOCK=NONE;
