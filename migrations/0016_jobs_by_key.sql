-- pinledger: concurrently
-- Serves the fold of a keyed enqueue (decision 0037): the jobs of one partition holding
-- a key (queries.sql keyed_jobs), read once per batch that enqueues keyed jobs. Only
-- keyed jobs are indexed. Built concurrently: a plain CREATE INDEX would stop the
-- projection's writes to jobs until it is built.
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_by_key ON jobs (queue, partition, unique_key) WHERE unique_key IS NOT NULL;
