-- pinledger: online
-- Whether a queue is paused from the catalog, as Postgres's migrations/0014_queue_paused.sql.
-- A column with a constant default added in place (ALGORITHM=INSTANT, LOCK=NONE: refused
-- rather than locking): no table copy.
ALTER TABLE queues ADD COLUMN IF NOT EXISTS paused BOOLEAN NOT NULL DEFAULT FALSE,
    ALGORITHM=INSTANT, LOCK=NONE;
