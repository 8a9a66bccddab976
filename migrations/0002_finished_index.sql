-- pinledger: concurrently
-- Serves the owners' garbage collection: finished jobs of one partition by age. Built
-- concurrently: a plain CREATE INDEX would stop every write to jobs until it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_finished ON jobs (queue, partition, state, updated_at) WHERE state >= 2;
