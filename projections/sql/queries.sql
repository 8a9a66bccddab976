-- The statements both SQL dialects run as written, by name: what Postgres and MariaDB
-- spell alike. Loaded with each dialect's own queries.sql (projections/pg/sql.py,
-- projections/mysql/sql.py) by projections/sql/named_queries.py; a name is defined in
-- one of the two files only. Parameters are %(name)s in both drivers (psycopg, PyMySQL).

-- name: applied_migrations
SELECT version FROM schema_migrations ORDER BY version;

-- name: record_migration
INSERT INTO schema_migrations (version, name) VALUES (%(version)s, %(name)s);

-- name: list_queues
SELECT name, partitions, created_at, open_partitions, retired_from, paused FROM queues
ORDER BY name;

-- name: retire_partitions
-- A queue's partitions `first` and above retired (decision 0030), unless a later resize
-- reopened some of them before this record was projected: only closed ones retire.
UPDATE queues SET retired_from = %(first)s
WHERE name = %(name)s AND %(first)s >= COALESCE(open_partitions, partitions);

-- name: delete_queue
DELETE FROM queues WHERE name = %(name)s;

-- name: delete_queue_placements
DELETE FROM partition_placements WHERE queue = %(name)s;

-- name: delete_queue_skips
DELETE FROM skipped_records WHERE queue = %(name)s;

-- name: delete_queue_ticks
DELETE FROM schedule_ticks WHERE queue = %(name)s;

-- name: delete_queue_jobs
DELETE FROM jobs WHERE queue = %(name)s;

-- name: delete_queue_job_events
DELETE FROM job_events WHERE queue = %(name)s;

-- name: delete_queue_imported
DELETE FROM imported_descriptors WHERE queue = %(name)s;

-- name: delete_topic_offsets
-- A deleted queue's offsets go first, in its deletion's transaction: a projector of the
-- queue committing at the same moment holds its offset row, so the deletion waits for
-- it and its later statements see (and delete) the rows it committed; one that commits
-- after the deletion finds no offset and is fenced (PartitionGoneError).
DELETE FROM partition_offsets WHERE topic = %(topic)s;

-- name: session_ended
SELECT 1 FROM ended_sessions WHERE id = %(id)s;

-- name: forget_ended_sessions
-- Sessions whose cookies have expired by now need no row to be refused.
DELETE FROM ended_sessions WHERE until_ms <= %(now)s;

-- name: pause_queue
-- A queue paused or resumed from the catalog (decision 0035): the last record stands.
UPDATE queues SET paused = %(paused)s WHERE name = %(name)s;

-- name: list_schedule_ticks
-- The latest tick of every periodic job's schedule (decision 0038).
SELECT queue, schedule, tick_ms, job, at_ms FROM schedule_ticks ORDER BY queue, schedule;

-- name: queue_schedule_ticks
-- The latest tick of each of one queue's schedules.
SELECT queue, schedule, tick_ms, job, at_ms FROM schedule_ticks WHERE queue = %(queue)s
ORDER BY schedule;
