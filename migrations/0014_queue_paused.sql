-- pinledger: online
-- Whether a queue is paused from the catalog (`QueuePaused`, decision 0035): dequeues
-- hand out none of its jobs. A column with a constant default: since Postgres 11 the
-- default is kept in the catalog, no table rewrite.
ALTER TABLE queues ADD COLUMN paused boolean NOT NULL DEFAULT false;
