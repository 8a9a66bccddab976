-- pinledger: pause "indexes the partitioned job_events, which Postgres cannot index concurrently: writes to job_events wait for the whole build"
-- Serves the dashboard's enqueue and completion rates: one queue's events of one type
-- over a time range (projections/pg/queries.sql event_buckets).
CREATE INDEX job_events_by_type ON job_events (queue, type, at);
