-- pinledger: online
-- An imported queue's descriptors of one partition in key order, for the clean-up after
-- the partition moved to another store shard, as Postgres's
-- migrations/0012_imported_by_partition.sql. Built in place while writes go on
-- (ALGORITHM=INPLACE, LOCK=NONE: refused rather than locking).
ALTER TABLE imported_descriptors
    ADD INDEX IF NOT EXISTS imported_by_partition (queue, `partition`, old_descriptor),
    ALGORITHM=INPLACE, LOCK=NONE;
