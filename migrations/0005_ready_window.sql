-- pinledger: concurrently
-- The owners keep a bounded ready window per partition instead of every unfinished job
-- (docs/decisions/0014-ready-window.md). The window refills from jobs_ready, in dequeue
-- order; claim timeouts read IN_PROGRESS jobs through jobs_claimed. Both are partial,
-- so finished jobs (most of the table) cost them nothing. Built concurrently: a plain
-- CREATE INDEX would stop every write to jobs, so every projection, until it is built
-- (decision 0024).
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_ready ON jobs (queue, partition, priority, run_after, local_id) WHERE state = 0;
CREATE INDEX CONCURRENTLY IF NOT EXISTS jobs_claimed ON jobs (queue, partition, touched_at) WHERE state = 1;
