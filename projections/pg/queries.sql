-- Every SQL statement pinledger runs, by name. Loaded once by projections/pg/sql.py.
-- A block starts with `-- name: <name>`; the comment lines after it describe it.
-- Parameters are psycopg's %(name)s; {schema}-style names are identifiers composed
-- with psycopg.sql (never user text). `away` (an integer array) is the partitions of the
-- queue that a queue-wide read leaves out: placed on another shard (decision 0031).

-- name: create_migrations_table
-- Which numbered files of migrations/ a schema has had applied.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     integer PRIMARY KEY,
    name        text    NOT NULL,
    applied_at  timestamptz NOT NULL DEFAULT now()
);

-- name: create_schema
CREATE SCHEMA IF NOT EXISTS {schema};

-- name: drop_schema
DROP SCHEMA IF EXISTS {schema} CASCADE;

-- name: database_exists
-- A second database on the same server, as a second store shard for the tests and the
-- move benchmark (projections/pg/databases.py).
SELECT 1 FROM pg_database WHERE datname = %(name)s;

-- name: create_database
CREATE DATABASE {database};

-- name: try_lock_migrations
-- Two processes migrating the same schema at once take turns. Held by the session (its
-- end releases it), not a transaction: a concurrent migration runs outside any
-- (decision 0024). Tried, not waited for: a session waiting on it holds a snapshot,
-- which the holder's CREATE INDEX CONCURRENTLY waits for in turn (a deadlock).
SELECT pg_try_advisory_lock(hashtext(current_schema()));

-- name: migrations_table_exists
-- Whether this schema has had a migration run (`migrate --check` creates nothing).
SELECT to_regclass(quote_ident(current_schema()) || '.schema_migrations') IS NOT NULL;

-- name: index_is_invalid
-- An index of this schema that a CREATE INDEX CONCURRENTLY left INVALID when it was
-- interrupted: present (IF NOT EXISTS would keep it) but never used by a query.
SELECT NOT x.indisvalid
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_namespace n ON n.oid = i.relnamespace
WHERE n.nspname = current_schema() AND i.relname = %(name)s;

-- name: drop_index_concurrently
DROP INDEX CONCURRENTLY IF EXISTS {index};

-- name: get_offset
SELECT next_offset FROM partition_offsets WHERE topic = %(topic)s AND partition = %(partition)s;

-- name: init_offset
-- The catalog's own offset, and a move's target shard: recorded at 0 when missing. A
-- queue's partitions get theirs from the catalog's projection only (init_queue_offset).
INSERT INTO partition_offsets (topic, partition, next_offset)
VALUES (%(topic)s, %(partition)s, 0)
ON CONFLICT (topic, partition) DO NOTHING;

-- name: init_queue_offset
-- A partition of a queue the catalog creates or grows starts at 0; only while the queue
-- exists (a resize projected after the queue's deletion creates nothing).
INSERT INTO partition_offsets (topic, partition, next_offset)
SELECT %(topic)s, %(partition)s, 0 FROM queues WHERE name = %(name)s
ON CONFLICT (topic, partition) DO NOTHING;

-- name: advance_offset
-- Compare-and-set: moves only from the offset this projector started its batch at,
-- so two projectors of one partition can never both commit the same records.
UPDATE partition_offsets SET next_offset = %(next)s
WHERE topic = %(topic)s AND partition = %(partition)s AND next_offset = %(expected)s;

-- name: load_jobs
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND local_id = ANY(%(ids)s);

-- name: keyed_jobs
-- The jobs of one partition holding any of the keys (decision 0037): what the fold of
-- a batch with keyed enqueues decides them against. The 13 columns of load_jobs, then
-- the key.
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       unique_key
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND unique_key = ANY(%(keys)s);

-- name: partition_jobs
-- Every job of one partition in the given states (an owner warming up, tests).
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND state = ANY(%(states)s);

-- name: partition_traceparents
-- The enqueue trace context of the jobs of one partition in the given states: what a new
-- owner hands to workers and links its claim spans to.
SELECT local_id, traceparent
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND state = ANY(%(states)s)
  AND traceparent IS NOT NULL;

-- name: ready_jobs
-- An owner's ready window refills from here: PENDING jobs of one priority of one
-- partition in dequeue order, after a (run_after, local_id) key, with bodies and trace
-- contexts. The row comparison is an index condition of jobs_ready, so the cost does
-- not depend on how many jobs wait (docs/decisions/0014-ready-window.md).
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       traceparent
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND state = 0
  AND priority = %(priority)s
  AND (run_after, local_id) > (%(after_run_after)s, %(after_local_id)s)
ORDER BY run_after, local_id
LIMIT %(limit)s;

-- name: expired_claims
-- The owner's claim timeouts: IN_PROGRESS jobs of one partition not touched since a
-- cut-off, oldest first, through jobs_claimed; no bodies.
SELECT local_id, priority, state, '\x'::bytea, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       traceparent
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s AND state = 1
  AND touched_at <= %(touched_before)s
ORDER BY touched_at, local_id
LIMIT %(limit)s;

-- name: remove_jobs
DELETE FROM jobs WHERE queue = %(queue)s AND partition = %(partition)s AND local_id = ANY(%(ids)s);

-- name: upsert_job
INSERT INTO jobs (queue, partition, local_id, priority, state, body, attempts_allowed,
                  attempts_remaining, custom_status, created_at, run_after, updated_at,
                  claim, claim_source, touched_at, traceparent, unique_key)
VALUES (%(queue)s, %(partition)s, %(local_id)s, %(priority)s, %(state)s, %(body)s,
        %(attempts_allowed)s, %(attempts_remaining)s, %(custom_status)s, %(created_at)s,
        %(run_after)s, %(updated_at)s, %(claim)s, %(claim_source)s, %(touched_at)s,
        %(traceparent)s, %(unique_key)s)
ON CONFLICT (queue, partition, local_id) DO UPDATE SET
    priority = EXCLUDED.priority,
    state = EXCLUDED.state,
    body = EXCLUDED.body,
    attempts_allowed = EXCLUDED.attempts_allowed,
    attempts_remaining = EXCLUDED.attempts_remaining,
    custom_status = EXCLUDED.custom_status,
    run_after = EXCLUDED.run_after,
    updated_at = EXCLUDED.updated_at,
    claim = EXCLUDED.claim,
    claim_source = EXCLUDED.claim_source,
    touched_at = EXCLUDED.touched_at;

-- name: record_imported
-- The first import of a PinLater descriptor stays (a page the importer appended twice
-- after a crash maps to its first copy).
INSERT INTO imported_descriptors (queue, old_descriptor, partition, local_id, priority)
VALUES (%(queue)s, %(old_descriptor)s, %(partition)s, %(local_id)s, %(priority)s)
ON CONFLICT (queue, old_descriptor) DO NOTHING;

-- name: imported_descriptors
-- The new place of imported jobs, by their PinLater descriptors.
SELECT old_descriptor, partition, local_id, priority FROM imported_descriptors
WHERE queue = %(queue)s AND old_descriptor = ANY(%(old)s::text[])
  AND partition <> ALL(%(away)s::integer[]);

-- name: create_queue
INSERT INTO queues (name, partitions, created_at) VALUES (%(name)s, %(partitions)s, %(at)s)
ON CONFLICT (name) DO NOTHING;

-- name: place_partition
-- A partition's projection placed on a store shard (decision 0031): only a partition the
-- queue has, and only its first placement (two servers resizing at once place it once).
INSERT INTO partition_placements (queue, partition, shard)
SELECT name, %(partition)s, %(shard)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s
ON CONFLICT (queue, partition) DO NOTHING;

-- name: move_partition
-- A partition's projection moved to another store shard (decision 0031): only while it
-- is on the shard the move names ('': unplaced, on home), so of two moves the first wins.
INSERT INTO partition_placements (queue, partition, shard)
SELECT name, %(partition)s, %(shard)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s
  AND COALESCE((SELECT shard FROM partition_placements
                WHERE queue = %(name)s AND partition = %(partition)s), '') = %(source)s
ON CONFLICT (queue, partition) DO UPDATE SET shard = EXCLUDED.shard;

-- name: skip_record
-- A queue record an operator skipped (decision 0032): only for a partition the queue has,
-- and only the first skip of an offset stands (projections/skips.py folds the same).
INSERT INTO skipped_records (queue, partition, record_offset, reason)
SELECT name, %(partition)s, %(offset)s, %(reason)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s
  AND %(partition)s >= 0 AND %(offset)s >= 0
ON CONFLICT (queue, partition, record_offset) DO NOTHING;

-- name: record_tick
-- A periodic job's tick (decision 0038): only of a queue the store holds, and only when
-- it is later than the schedule's latest, which stands otherwise (two catalog owners of
-- a failover recording one tick leave the first; projections/schedule_ticks.py folds
-- the same).
INSERT INTO schedule_ticks (queue, schedule, tick_ms, job, at_ms)
SELECT name, %(schedule)s, %(tick_ms)s, %(job)s, %(at)s FROM queues WHERE name = %(name)s
ON CONFLICT (queue, schedule) DO UPDATE
SET tick_ms = EXCLUDED.tick_ms, job = EXCLUDED.job, at_ms = EXCLUDED.at_ms
WHERE schedule_ticks.tick_ms < EXCLUDED.tick_ms;

-- name: skipped_records
-- The records of one partition its projectors pass over.
SELECT record_offset, reason FROM skipped_records
WHERE queue = %(queue)s AND partition = %(partition)s
ORDER BY record_offset;

-- name: list_placements
SELECT queue, partition, shard FROM partition_placements ORDER BY queue, partition;

-- name: resize_queue
-- A queue resized in the catalog (decision 0030): its partitions only ever grow (Kafka
-- never removes one); the first `partitions` of them take new jobs, and no retired
-- partition is among those.
UPDATE queues SET partitions = GREATEST(partitions, %(partitions)s),
                  open_partitions = %(partitions)s,
                  retired_from = CASE WHEN retired_from IS NULL THEN NULL
                                      WHEN retired_from < %(partitions)s THEN %(partitions)s
                                      ELSE retired_from END
WHERE name = %(name)s;

-- name: job_timeline
SELECT "offset", idx, type, at, source, request_id, server, claim, applied, verdict,
       state_after, attempts_remaining_after, detail, traceparent
FROM job_events
WHERE queue = %(queue)s AND partition = %(partition)s AND local_id = %(local_id)s
ORDER BY "offset", idx;

-- name: diff_rows
-- Rows of {table} in schema {left} that schema {right} lacks (compared column by
-- column), limited to the replayed queues and, when given, one partition. Run both
-- ways round for a symmetric difference.
SELECT to_jsonb(l) FROM (
    SELECT * FROM {left}.{table} WHERE {queue_column} = ANY(%(queues)s)
        AND (%(partition)s::integer IS NULL OR {partition_column} = %(partition)s)
    EXCEPT ALL
    SELECT * FROM {right}.{table} WHERE {queue_column} = ANY(%(queues)s)
        AND (%(partition)s::integer IS NULL OR {partition_column} = %(partition)s)
) AS l
LIMIT %(limit)s;

-- name: diff_count
SELECT count(*) FROM (
    SELECT * FROM {left}.{table} WHERE {queue_column} = ANY(%(queues)s)
        AND (%(partition)s::integer IS NULL OR {partition_column} = %(partition)s)
    EXCEPT ALL
    SELECT * FROM {right}.{table} WHERE {queue_column} = ANY(%(queues)s)
        AND (%(partition)s::integer IS NULL OR {partition_column} = %(partition)s)
) AS d;

-- name: get_offsets
-- How far the projection has got in many partitions at once (read-your-writes waits).
SELECT topic, partition, next_offset FROM partition_offsets
WHERE (topic, partition) IN (SELECT * FROM unnest(%(topics)s::text[], %(partitions)s::integer[]));

-- name: check_regex
-- Body regexes are Postgres regular expressions, passed as parameters; this raises
-- invalid_regular_expression for a bad one before any real query runs.
SELECT '' ~ %(regex)s;

-- name: lookup_jobs
-- lookupJobs: many jobs of one queue by (partition, local_id); the body only on demand.
SELECT j.partition, j.local_id, j.priority, j.state, j.attempts_allowed,
       j.attempts_remaining, j.custom_status, j.created_at, j.run_after, j.updated_at,
       j.claim, CASE WHEN %(include_body)s THEN j.body END, j.unique_key
FROM jobs j
JOIN unnest(%(partitions)s::integer[], %(ids)s::bigint[]) AS k(partition, local_id)
  ON j.partition = k.partition AND j.local_id = k.local_id
WHERE j.queue = %(queue)s;

-- name: count_jobs
-- getJobCount: one state, one or all priorities, due now or (future) not yet due,
-- optionally only bodies matching a regex (bodies read as escaped text).
SELECT count(*) FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s::smallint IS NULL OR priority = %(priority)s)
  AND CASE WHEN %(future)s THEN run_after > %(now)s ELSE run_after <= %(now)s END
  AND (%(regex)s::text IS NULL OR encode(body, 'escape') ~ %(regex)s)
  AND partition <> ALL(%(away)s::integer[]);

-- name: scan_jobs
-- scanJobs: newest run_after first, keyset-paginated on (run_after, partition,
-- local_id) so a page never repeats or skips a row that did not move; no bodies.
SELECT partition, local_id, priority, state, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s::smallint IS NULL OR priority = %(priority)s)
  AND CASE WHEN %(future)s THEN run_after > %(now)s ELSE run_after <= %(now)s END
  AND (%(regex)s::text IS NULL OR encode(body, 'escape') ~ %(regex)s)
  AND partition <> ALL(%(away)s::integer[])
  AND (%(after_run_after)s::bigint IS NULL
       OR (run_after, partition, local_id)
          < (%(after_run_after)s, %(after_partition)s, %(after_local_id)s))
ORDER BY run_after DESC, partition DESC, local_id DESC
LIMIT %(limit)s;

-- name: select_jobs
-- Jobs for a bulk action (retryFailedJobs, deleteJobs): one state and priority,
-- optionally matching a body regex, oldest first. Bodies are left out (empty):
-- deciding the action does not need them.
SELECT partition, local_id, priority, state, '\x'::bytea, attempts_allowed,
       attempts_remaining, custom_status, created_at, run_after, updated_at, claim,
       claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s AND priority = %(priority)s
  AND (%(regex)s::text IS NULL OR encode(body, 'escape') ~ %(regex)s)
  AND partition <> ALL(%(away)s::integer[])
ORDER BY run_after, partition, local_id
LIMIT %(limit)s;

-- name: jobs_from_partition
-- Whether a queue holds any job in partition `first` or above: a closed partition
-- retires only once it holds none (decision 0030). Served by the primary key.
SELECT 1 FROM jobs WHERE queue = %(queue)s AND partition >= %(first)s
  AND partition <> ALL(%(away)s::integer[]) LIMIT 1;

-- name: expired_jobs
-- Finished jobs of one partition past their TTL, for the owner's garbage collection.
SELECT local_id, priority, state, '\x'::bytea, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s
  AND ((state = 2 AND updated_at <= %(succeeded_before)s)
       OR (state = 3 AND updated_at <= %(failed_before)s))
LIMIT %(limit)s;

-- name: job_counts
-- Jobs by queue, state and priority, per partition: what replay prints as a summary
-- (the store sums the partitions, leaving out those it hides).
SELECT queue, partition, state, priority, count(*) FROM jobs
GROUP BY queue, state, priority, partition
ORDER BY queue, state, priority, partition;

-- name: last_event_time
-- The time of the newest event projected for a queue (NULL: none).
SELECT max(at) FROM job_events
WHERE queue = %(queue)s AND partition <> ALL(%(away)s::integer[]);

-- name: queue_counts_as_of
-- `replay --as-of`: one queue's jobs by state and priority, split as getJobCount
-- splits them: due (run_after <= now) or future.
SELECT state, priority, run_after > %(now)s AS future, count(*)
FROM jobs
WHERE queue = %(queue)s AND partition <> ALL(%(away)s::integer[])
GROUP BY state, priority, future
ORDER BY state, priority, future;

-- name: due_jobs_in_dequeue_order
-- `replay --as-of`: PENDING jobs due at `now`, in the order a dequeue takes them (the
-- owners' ready buffers: priority, then run_after, then local_id; partitions in order).
SELECT partition, local_id, priority, run_after
FROM jobs
WHERE queue = %(queue)s AND state = 0 AND run_after <= %(now)s
  AND partition <> ALL(%(away)s::integer[])
ORDER BY priority, run_after, local_id, partition
LIMIT %(limit)s;

-- name: describe_columns
-- The shape of the current schema's tables (tests/integration/test_schema.py compares
-- what migrations/ produce with projections/pg/schema.sql); the migration runner's own
-- table is left out.
SELECT table_name, column_name, data_type, is_nullable, column_default
FROM information_schema.columns
WHERE table_schema = current_schema() AND table_name <> 'schema_migrations'
ORDER BY table_name, ordinal_position;

-- name: describe_indexes
SELECT t.relname, i.relname, pg_get_indexdef(i.oid)
FROM pg_index x
JOIN pg_class i ON i.oid = x.indexrelid
JOIN pg_class t ON t.oid = x.indrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = current_schema() AND t.relname <> 'schema_migrations'
ORDER BY 1, 2;

-- name: describe_constraints
SELECT t.relname, c.conname, c.contype, pg_get_constraintdef(c.oid)
FROM pg_constraint c
JOIN pg_class t ON t.oid = c.conrelid
JOIN pg_namespace n ON n.oid = t.relnamespace
WHERE n.nspname = current_schema() AND t.relname <> 'schema_migrations'
ORDER BY 1, 2;

-- name: day_partitions
-- The partitions of job_events (one per UTC day, projections/day_partitions.py)
-- with their bounds as Postgres prints them, and whether a detach of it was left
-- unfinished (a DETACH ... CONCURRENTLY interrupted: it must be finalized).
SELECT c.relname, pg_get_expr(c.relpartbound, c.oid), i.inhdetachpending
FROM pg_inherits i
JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'job_events'::regclass
ORDER BY 1;

-- name: detached_day_tables
-- Day tables of job_events that are no longer its partitions: detached by a drop that
-- stopped before its DROP TABLE.
SELECT c.relname
FROM pg_class c
WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind = 'r'
  AND NOT c.relispartition AND c.relname LIKE 'job\_events\_p%'
ORDER BY 1;

-- name: lock_day_partitions
-- Creating partitions takes turns between the processes sharing a schema.
SELECT pg_advisory_xact_lock(hashtext(current_schema() || '.job_events partitions'));

-- name: day_partitions_lock_timeout
-- DDL on job_events waits at most this long for a lock, then fails (and is retried)
-- rather than queue every reader and writer of the timeline behind it.
SET LOCAL lock_timeout = '5s';

-- name: create_day_table
-- A day's partition is created outside the table and then attached: ATTACH takes a
-- SHARE UPDATE EXCLUSIVE lock on job_events, which concurrent reads and inserts do not
-- wait for, where CREATE TABLE ... PARTITION OF would take an ACCESS EXCLUSIVE one.
CREATE TABLE IF NOT EXISTS {partition} (LIKE job_events INCLUDING DEFAULTS INCLUDING CONSTRAINTS);

-- name: attach_day_partition
ALTER TABLE job_events ATTACH PARTITION {partition} FOR VALUES FROM ({start}) TO ({end});

-- name: detach_day_partition
-- Outside a transaction: readers and writers of job_events keep going meanwhile.
ALTER TABLE job_events DETACH PARTITION {partition} CONCURRENTLY;

-- name: finalize_day_detach
ALTER TABLE job_events DETACH PARTITION {partition} FINALIZE;

-- name: drop_day_table
DROP TABLE IF EXISTS {partition};

-- name: relation_bytes
-- Bytes on disk of a table with its indexes and TOAST, summed over its partitions
-- (a partitioned table has none of its own): bench/storage.py's bytes per job.
SELECT coalesce((SELECT sum(pg_total_relation_size(relid)) FROM pg_partition_tree(t)),
                pg_total_relation_size(t))::bigint
FROM (SELECT %(table)s::regclass AS t) AS named;

-- name: schema_table_bytes
-- Each table of the schema with its data bytes (heap, TOAST, free-space and visibility
-- maps) and its index bytes, a partitioned table's partitions summed under its name:
-- bench/sizing.py's bytes per job.
SELECT coalesce(parent.relname, c.relname) AS table_name,
       sum(pg_table_size(c.oid))::bigint AS data_bytes,
       sum(pg_indexes_size(c.oid))::bigint AS index_bytes
FROM pg_class c
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits i ON i.inhrelid = c.oid
LEFT JOIN pg_class parent ON parent.oid = i.inhparent
WHERE n.nspname = current_schema() AND c.relkind = 'r'
GROUP BY 1;

-- name: vacuum_table
-- As autovacuum would have by then: the dead versions of updated rows reclaimed.
VACUUM (ANALYZE) {table};

-- name: find_jobs
-- The dashboard's job finder: one state, optionally one priority, a body regex and a
-- custom-status regex, due or not; newest run_after first, keyset-paginated on
-- (run_after, partition, local_id) like scan_jobs, on the jobs_by_state index; bodies
-- included (a page is small).
SELECT partition, local_id, priority, state, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, body, unique_key
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s::smallint IS NULL OR priority = %(priority)s)
  AND (%(body_regex)s::text IS NULL OR encode(body, 'escape') ~ %(body_regex)s)
  AND (%(status_regex)s::text IS NULL OR custom_status ~ %(status_regex)s)
  AND partition <> ALL(%(away)s::integer[])
  AND (%(after_run_after)s::bigint IS NULL
       OR (run_after, partition, local_id)
          < (%(after_run_after)s, %(after_partition)s, %(after_local_id)s))
ORDER BY run_after DESC, partition DESC, local_id DESC
LIMIT %(limit)s;

-- name: oldest_due
-- The dashboard's "oldest due job": the smallest run_after of PENDING due jobs, one
-- index probe (jobs_by_state) per priority rather than a scan of the queue. The
-- partitions hidden (`away`) are tested only when there are some: a filter on
-- `partition`, which the index lacks, would make an index-only scan a heap scan.
SELECT min(first.run_after)
FROM generate_series(1, %(priorities)s) AS p(priority)
CROSS JOIN LATERAL (
    SELECT run_after FROM jobs
    WHERE queue = %(queue)s AND state = 0 AND priority = p.priority
      AND run_after <= %(now)s
      AND (cardinality(%(away)s::integer[]) = 0 OR partition <> ALL(%(away)s::integer[]))
    ORDER BY run_after
    LIMIT 1
) AS first;

-- name: event_buckets
-- The dashboard's rates: applied events of some types of one queue per time bucket, over a
-- bounded time range, on the job_events_by_type index (migration 0006).
SELECT %(since)s + ((at - %(since)s) / %(bucket_ms)s) * %(bucket_ms)s AS start, type,
       count(*)
FROM job_events
WHERE queue = %(queue)s AND type = ANY(%(types)s) AND at >= %(since)s AND at < %(until)s
  AND applied AND partition <> ALL(%(away)s::integer[])
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: queue_tally
-- The dashboard's overview: one queue's jobs by state, each count stopping at the cap
-- (a LIMIT inside each count), so a queue of millions costs a few short ranges of the
-- jobs_by_state index, in its order: PENDING split at now, one range per priority
-- (LATERAL, as oldest_due), the other states one range each; `away` as in oldest_due.
SELECT
    (SELECT least(coalesce(sum(per.n), 0), %(cap)s)
     FROM generate_series(1, %(priorities)s) AS p(priority)
     CROSS JOIN LATERAL (
         SELECT count(*) AS n FROM (
             SELECT 1 FROM jobs
             WHERE queue = %(queue)s AND state = 0 AND priority = p.priority
               AND run_after <= %(now)s
               AND (cardinality(%(away)s::integer[]) = 0
                    OR partition <> ALL(%(away)s::integer[]))
             ORDER BY run_after
             LIMIT %(cap)s) AS due) AS per),
    (SELECT least(coalesce(sum(per.n), 0), %(cap)s)
     FROM generate_series(1, %(priorities)s) AS p(priority)
     CROSS JOIN LATERAL (
         SELECT count(*) AS n FROM (
             SELECT 1 FROM jobs
             WHERE queue = %(queue)s AND state = 0 AND priority = p.priority
               AND run_after > %(now)s
               AND (cardinality(%(away)s::integer[]) = 0
                    OR partition <> ALL(%(away)s::integer[]))
             ORDER BY run_after
             LIMIT %(cap)s) AS future) AS per),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs
        WHERE queue = %(queue)s AND state = 1
          AND (cardinality(%(away)s::integer[]) = 0 OR partition <> ALL(%(away)s::integer[]))
        ORDER BY priority, run_after LIMIT %(cap)s) AS running),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs
        WHERE queue = %(queue)s AND state = 2
          AND (cardinality(%(away)s::integer[]) = 0 OR partition <> ALL(%(away)s::integer[]))
        ORDER BY priority, run_after LIMIT %(cap)s) AS succeeded),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs
        WHERE queue = %(queue)s AND state = 3
          AND (cardinality(%(away)s::integer[]) = 0 OR partition <> ALL(%(away)s::integer[]))
        ORDER BY priority, run_after LIMIT %(cap)s) AS failed);

-- name: stream_jobs
-- The verify's live side (projections/verify.py): a partition's jobs in a range of local
-- ids, by local id (the primary key's order: no sort), read through a server-side
-- cursor so the reader's memory does not grow with the partition.
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       traceparent
FROM jobs
WHERE queue = %(queue)s AND partition = %(partition)s
  AND local_id >= %(lo)s AND local_id < %(hi)s
ORDER BY local_id;

-- name: stream_events
-- The verify's live side: a partition's timeline from an offset on, in log order (the
-- order the fold produces it), through a server-side cursor. Postgres sorts the
-- partition's rows once (spilling to disk past work_mem), not per page.
SELECT local_id, "offset", idx, type, at, source, request_id, server, claim, applied,
       verdict, state_after, attempts_remaining_after, detail, traceparent
FROM job_events
WHERE queue = %(queue)s AND partition = %(partition)s AND "offset" >= %(from_offset)s
ORDER BY "offset", idx, local_id, at;

-- name: job_lines
-- The verify's live jobs as Postgres prints them (projections/row_text.py), streamed by
-- COPY: the rows never become Python objects; the fold's lines compare as bytes.
COPY (
    SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
           custom_status, created_at, run_after, updated_at, claim, claim_source,
           touched_at, traceparent
    FROM jobs
    WHERE queue = %(queue)s AND partition = %(partition)s
      AND local_id >= %(lo)s AND local_id < %(hi)s
    ORDER BY local_id
) TO STDOUT;

-- name: event_lines
-- The verify's live timeline as Postgres prints it, in log order, streamed by COPY.
COPY (
    SELECT "offset", idx, local_id, at, type, source, request_id, server, claim, applied,
           verdict, state_after, attempts_remaining_after, detail, traceparent
    FROM job_events
    WHERE queue = %(queue)s AND partition = %(partition)s AND "offset" >= %(from_offset)s
    ORDER BY "offset", idx, local_id, at
) TO STDOUT;

-- name: copy_job_events_binary
-- The timeline rows of a batch in COPY's binary format: nothing formatted as text on
-- either side (docs/performance-history.md, "Replay").
COPY job_events (queue, partition, local_id, "offset", idx, type, at, source, request_id,
                 server, claim, applied, verdict, state_after, attempts_remaining_after,
                 detail, traceparent) FROM STDIN (FORMAT BINARY);

-- name: create_jobs_stage
-- A large batch's jobs are copied (binary COPY) into this table of the session, then
-- upserted from it in one statement (upsert_staged_jobs): ~60% less of our CPU than
-- an upsert over arrays did (docs/performance-history.md, "Replay"). Emptied at each commit.
CREATE TEMP TABLE IF NOT EXISTS jobs_stage (LIKE jobs) ON COMMIT DELETE ROWS;

-- name: copy_jobs_stage
COPY jobs_stage (queue, partition, local_id, priority, state, body, attempts_allowed,
                 attempts_remaining, custom_status, created_at, run_after, updated_at,
                 claim, claim_source, touched_at, traceparent, unique_key)
FROM STDIN (FORMAT BINARY);

-- name: upsert_staged_jobs
-- As upsert_job: the first created_at and trace context of a job stay.
INSERT INTO jobs (queue, partition, local_id, priority, state, body, attempts_allowed,
                  attempts_remaining, custom_status, created_at, run_after, updated_at,
                  claim, claim_source, touched_at, traceparent, unique_key)
SELECT queue, partition, local_id, priority, state, body, attempts_allowed,
       attempts_remaining, custom_status, created_at, run_after, updated_at, claim,
       claim_source, touched_at, traceparent, unique_key
FROM jobs_stage
ON CONFLICT (queue, partition, local_id) DO UPDATE SET
    priority = EXCLUDED.priority,
    state = EXCLUDED.state,
    body = EXCLUDED.body,
    attempts_allowed = EXCLUDED.attempts_allowed,
    attempts_remaining = EXCLUDED.attempts_remaining,
    custom_status = EXCLUDED.custom_status,
    run_after = EXCLUDED.run_after,
    updated_at = EXCLUDED.updated_at,
    claim = EXCLUDED.claim,
    claim_source = EXCLUDED.claim_source,
    touched_at = EXCLUDED.touched_at;

-- name: end_session
-- A logout: the session's digest, until its cookie would have expired anyway.
INSERT INTO ended_sessions (id, until_ms) VALUES (%(id)s, %(until)s)
ON CONFLICT (id) DO NOTHING;

-- name: forget_partition_offset
-- A partition moved to another store shard (decision 0031): its offset row here goes
-- first, so that a projector still writing here is fenced (PartitionGoneError).
DELETE FROM partition_offsets WHERE topic = %(topic)s AND partition = %(partition)s;

-- name: moved_jobs_batch_end
-- The rows of a partition moved away are deleted in batches of `limit`, in key order.
SELECT max(local_id) FROM (
    SELECT local_id FROM jobs WHERE queue = %(queue)s AND partition = %(partition)s
    ORDER BY local_id LIMIT %(limit)s) AS batch;

-- name: remove_moved_jobs
DELETE FROM jobs WHERE queue = %(queue)s AND partition = %(partition)s AND local_id <= %(upto)s;

-- name: moved_job_events_batch_end
SELECT max(local_id) FROM (
    SELECT local_id FROM job_events WHERE queue = %(queue)s AND partition = %(partition)s
    ORDER BY local_id LIMIT %(limit)s) AS batch;

-- name: remove_moved_job_events
DELETE FROM job_events
WHERE queue = %(queue)s AND partition = %(partition)s AND local_id <= %(upto)s;

-- name: moved_imported_batch_end
SELECT max(old_descriptor) FROM (
    SELECT old_descriptor FROM imported_descriptors
    WHERE queue = %(queue)s AND partition = %(partition)s
    ORDER BY old_descriptor LIMIT %(limit)s) AS batch;

-- name: remove_moved_imported
DELETE FROM imported_descriptors
WHERE queue = %(queue)s AND partition = %(partition)s AND old_descriptor <= %(upto)s;

-- name: claim_holders
-- The dashboard's workers view (issue 42): per claim source (the RequestContext source of
-- the worker that dequeued), the queue's IN_PROGRESS jobs it holds and its last heartbeat
-- (the latest claim taken or renewed), the most jobs first; on the index of claimed jobs
-- (jobs_claimed), bounded by %(limit)s sources.
SELECT claim_source, count(*) AS held, max(touched_at) AS last_heartbeat FROM jobs
WHERE queue = %(queue)s AND state = 1
  AND (cardinality(%(away)s::integer[]) = 0 OR partition <> ALL(%(away)s::integer[]))
GROUP BY claim_source
ORDER BY held DESC, claim_source
LIMIT %(limit)s;
