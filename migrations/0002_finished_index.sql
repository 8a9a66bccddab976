-- Serves the owners' garbage collection: finished jobs of one partition by age.
CREATE INDEX jobs_finished ON jobs (queue, partition, state, updated_at) WHERE state >= 2;
