-- pinledger: online
-- From which partition on a queue's partitions are retired, as Postgres's
-- migrations/0010_queue_retired_partitions.sql. A nullable column added in place
-- (ALGORITHM=INSTANT, LOCK=NONE: refused rather than locking): no table copy.
ALTER TABLE queues ADD COLUMN IF NOT EXISTS retired_from INT NULL CHECK (retired_from >= 0),
    ALGORITHM=INSTANT, LOCK=NONE;
