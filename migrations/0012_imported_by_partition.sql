-- pinledger: concurrently
-- Serves the clean-up after a partition moved to another store shard (decision 0031):
-- an imported queue's descriptors of one partition, in key order, a batch at a time
-- (queries.sql moved_imported_batch_end, remove_moved_imported). Without it, each batch
-- read every imported descriptor of the queue. Built concurrently: a plain CREATE INDEX
-- would stop the projection's writes to imported_descriptors until it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS imported_by_partition ON imported_descriptors (queue, partition, old_descriptor);
