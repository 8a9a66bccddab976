-- Every SQL statement the MySQL store runs, by name, in MariaDB's dialect (10.6+; MySQL
-- 8 lacks EXCEPT ALL and the partition DDL used here). Loaded once by
-- projections/mysql/sql.py. A block starts with `-- name: <name>`; the comment lines
-- after it describe it. Parameters are PyMySQL's %(name)s, interpolated by the driver
-- (a list becomes `(a, b, ...)`, a list of tuples `((a, b), ...)`), so a literal percent
-- sign is written %%. {name}-style names are identifiers (databases, tables,
-- partitions) quoted with backticks by sql.py, never user text.
-- `partition` is a reserved word in MariaDB and always quoted. `away` ("1,3", "" for
-- none: no arrays here) is the partitions of the queue that a queue-wide read leaves
-- out: placed on another shard (decision 0031). `%(away)s = ''` first: folded away when
-- nothing is hidden, so the plan is the one without the filter.

-- name: session_settings
-- Every connection: Postgres's default isolation (each statement sees what committed
-- before it), whatever the server's default is.
SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED;

-- name: create_schema
-- A store's "schema" is a MariaDB database.
CREATE DATABASE IF NOT EXISTS {schema} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin;

-- name: drop_schema
DROP DATABASE IF EXISTS {schema};

-- name: create_migrations_table
-- Which numbered files of migrations/mysql/ a database has had applied.
CREATE TABLE IF NOT EXISTS schema_migrations (
    version     INT          NOT NULL PRIMARY KEY,
    name        VARCHAR(255) NOT NULL,
    applied_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP
) ENGINE=InnoDB;

-- name: lock_migrations
-- Two processes migrating the same database take turns (a named lock: MariaDB's DDL
-- commits implicitly, so a migration cannot be one transaction as on Postgres). 1 when
-- taken, 0 when another held it for the whole minute.
SELECT GET_LOCK(CONCAT(DATABASE(), '.migrations'), 60);

-- name: migrations_table_exists
-- Whether this database has had a migration run (`migrate --check` creates nothing).
SELECT COUNT(*) > 0 FROM information_schema.TABLES
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'schema_migrations';

-- name: unlock_migrations
SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.migrations'));

-- name: get_offset
SELECT next_offset FROM partition_offsets
WHERE topic = %(topic)s AND `partition` = %(partition)s;

-- name: init_offset
-- The catalog's own offset, and a move's target shard: recorded at 0 when missing. A
-- queue's partitions get theirs from the catalog's projection only (init_queue_offset).
INSERT IGNORE INTO partition_offsets (topic, `partition`, next_offset)
VALUES (%(topic)s, %(partition)s, 0);

-- name: init_queue_offset
-- A partition of a queue the catalog creates or grows starts at 0; only while the queue
-- exists (a resize projected after the queue's deletion creates nothing).
INSERT IGNORE INTO partition_offsets (topic, `partition`, next_offset)
SELECT %(topic)s, %(partition)s, 0 FROM queues WHERE name = %(name)s;

-- name: advance_offset
-- Compare-and-set: moves only from the offset this projector started its batch at,
-- so two projectors of one partition can never both commit the same records.
UPDATE partition_offsets SET next_offset = %(next)s
WHERE topic = %(topic)s AND `partition` = %(partition)s AND next_offset = %(expected)s;

-- name: get_offsets
-- How far the projection has got in many partitions at once (read-your-writes waits).
SELECT topic, `partition`, next_offset FROM partition_offsets
WHERE (topic, `partition`) IN %(pairs)s;

-- name: load_jobs
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND local_id IN %(ids)s;

-- name: keyed_jobs
-- The jobs of one partition holding any of the keys (decision 0037): what the fold of
-- a batch with keyed enqueues decides them against. The 13 columns of load_jobs, then
-- the key.
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       unique_key
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND unique_key IN %(keys)s;

-- name: partition_jobs
-- Every job of one partition in the given states (an owner warming up, tests).
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND state IN %(states)s;

-- name: partition_traceparents
SELECT local_id, traceparent
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND state IN %(states)s
  AND traceparent IS NOT NULL;

-- name: ready_jobs
-- An owner's ready window refills from here (docs/decisions/0014-ready-window.md): a
-- range of the jobs_ready index. The key comparison is spelled out rather than as a
-- row comparison, which MariaDB's range optimizer does not turn into an index range.
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       traceparent
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND state = 0
  AND priority = %(priority)s
  AND (run_after > %(after_run_after)s
       OR (run_after = %(after_run_after)s AND local_id > %(after_local_id)s))
ORDER BY run_after, local_id
LIMIT %(limit)s;

-- name: expired_claims
-- The owner's claim timeouts: IN_PROGRESS jobs of one partition not touched since a
-- cut-off, oldest first, through jobs_claimed; no bodies.
SELECT local_id, priority, state, CAST('' AS BINARY), attempts_allowed,
       attempts_remaining, custom_status, created_at, run_after, updated_at, claim,
       claim_source, touched_at, traceparent
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s AND state = 1
  AND touched_at <= %(touched_before)s
ORDER BY touched_at, local_id
LIMIT %(limit)s;

-- name: upsert_job
-- One row per job; executemany sends a batch as multi-row INSERTs of about 1 MB each.
INSERT INTO jobs (queue, `partition`, local_id, priority, state, body, attempts_allowed,
                  attempts_remaining, custom_status, created_at, run_after, updated_at,
                  claim, claim_source, touched_at, traceparent, unique_key)
VALUES (%(queue)s, %(partition)s, %(local_id)s, %(priority)s, %(state)s, %(body)s,
        %(attempts_allowed)s, %(attempts_remaining)s, %(custom_status)s, %(created_at)s,
        %(run_after)s, %(updated_at)s, %(claim)s, %(claim_source)s, %(touched_at)s,
        %(traceparent)s, %(unique_key)s)
ON DUPLICATE KEY UPDATE
    priority = VALUES(priority),
    state = VALUES(state),
    body = VALUES(body),
    attempts_allowed = VALUES(attempts_allowed),
    attempts_remaining = VALUES(attempts_remaining),
    custom_status = VALUES(custom_status),
    run_after = VALUES(run_after),
    updated_at = VALUES(updated_at),
    claim = VALUES(claim),
    claim_source = VALUES(claim_source),
    touched_at = VALUES(touched_at);

-- name: remove_jobs
DELETE FROM jobs WHERE queue = %(queue)s AND `partition` = %(partition)s AND local_id IN %(ids)s;

-- name: insert_job_event
INSERT INTO job_events (queue, `partition`, local_id, `offset`, idx, type, at, source,
                        request_id, server, claim, applied, verdict, state_after,
                        attempts_remaining_after, detail, traceparent)
VALUES (%(queue)s, %(partition)s, %(local_id)s, %(offset)s, %(idx)s, %(type)s, %(at)s,
        %(source)s, %(request_id)s, %(server)s, %(claim)s, %(applied)s, %(verdict)s,
        %(state_after)s, %(attempts_remaining_after)s, %(detail)s, %(traceparent)s);

-- name: record_imported
-- The first import of a PinLater descriptor stays (a page the importer appended twice
-- after a crash maps to its first copy).
INSERT IGNORE INTO imported_descriptors (queue, old_descriptor, `partition`, local_id, priority)
VALUES (%(queue)s, %(old_descriptor)s, %(partition)s, %(local_id)s, %(priority)s);

-- name: imported_descriptors
-- The new place of imported jobs, by their PinLater descriptors.
SELECT old_descriptor, `partition`, local_id, priority FROM imported_descriptors
WHERE queue = %(queue)s AND old_descriptor IN %(old)s
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s));

-- name: create_queue
INSERT IGNORE INTO queues (name, partitions, created_at) VALUES (%(name)s, %(partitions)s, %(at)s);

-- name: place_partition
-- A partition's projection placed on a store shard (decision 0031): only a partition the
-- queue has, and only its first placement (two servers resizing at once place it once).
INSERT IGNORE INTO partition_placements (queue, `partition`, shard)
SELECT name, %(partition)s, %(shard)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s;

-- name: move_partition
-- A partition's projection moved to another store shard (decision 0031): only while it
-- is on the shard the move names ('': unplaced, on home), so of two moves the first wins.
INSERT INTO partition_placements (queue, `partition`, shard)
SELECT name, %(partition)s, %(shard)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s
  AND COALESCE((SELECT p.shard FROM partition_placements p
                WHERE p.queue = %(name)s AND p.`partition` = %(partition)s), '') = %(source)s
ON DUPLICATE KEY UPDATE shard = VALUES(shard);

-- name: skip_record
-- A queue record an operator skipped (decision 0032), as Postgres's skip_record.
INSERT IGNORE INTO skipped_records (queue, `partition`, record_offset, reason)
SELECT name, %(partition)s, %(offset)s, %(reason)s FROM queues
WHERE name = %(name)s AND partitions > %(partition)s
  AND %(partition)s >= 0 AND %(offset)s >= 0;

-- name: record_tick
-- A periodic job's tick (decision 0038), as Postgres's record_tick: only of a queue the
-- store holds, and only when later than the schedule's latest. MariaDB assigns left to
-- right, each assignment seeing the ones before it: tick_ms last, so that job and at_ms
-- compare with the tick held.
INSERT INTO schedule_ticks (queue, schedule, tick_ms, job, at_ms)
SELECT name, %(schedule)s, %(tick_ms)s, %(job)s, %(at)s FROM queues WHERE name = %(name)s
ON DUPLICATE KEY UPDATE
    job = IF(VALUES(tick_ms) > tick_ms, VALUES(job), job),
    at_ms = IF(VALUES(tick_ms) > tick_ms, VALUES(at_ms), at_ms),
    tick_ms = GREATEST(tick_ms, VALUES(tick_ms));

-- name: skipped_records
-- The records of one partition its projectors pass over.
SELECT record_offset, reason FROM skipped_records
WHERE queue = %(queue)s AND `partition` = %(partition)s
ORDER BY record_offset;

-- name: list_placements
SELECT queue, `partition`, shard FROM partition_placements ORDER BY queue, `partition`;

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
SELECT `offset`, idx, type, at, source, request_id, server, claim, applied, verdict,
       state_after, attempts_remaining_after, detail, traceparent
FROM job_events
WHERE queue = %(queue)s AND `partition` = %(partition)s AND local_id = %(local_id)s
ORDER BY `offset`, idx;

-- name: check_regex
-- Body regexes are MariaDB regular expressions (PCRE2), passed as parameters; this
-- fails with ER_REGEXP_ERROR (1139) for a bad one before any real query runs.
SELECT '' REGEXP %(regex)s;

-- name: lookup_jobs
-- lookupJobs: many jobs of one queue by (partition, local_id); the body only on demand.
SELECT `partition`, local_id, priority, state, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim,
       CASE WHEN %(include_body)s THEN body END, unique_key
FROM jobs
WHERE queue = %(queue)s AND (`partition`, local_id) IN %(pairs)s;

-- name: count_jobs
-- getJobCount: one state, one or all priorities, due now or (future) not yet due,
-- optionally only bodies matching a regex (matched on the body's bytes).
SELECT count(*) FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s IS NULL OR priority = %(priority)s)
  AND CASE WHEN %(future)s THEN run_after > %(now)s ELSE run_after <= %(now)s END
  AND (%(regex)s IS NULL OR body REGEXP %(regex)s)
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s));

-- name: scan_jobs
-- scanJobs: newest run_after first, keyset-paginated on (run_after, partition,
-- local_id) so a page never repeats or skips a row that did not move; no bodies.
SELECT `partition`, local_id, priority, state, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s IS NULL OR priority = %(priority)s)
  AND CASE WHEN %(future)s THEN run_after > %(now)s ELSE run_after <= %(now)s END
  AND (%(regex)s IS NULL OR body REGEXP %(regex)s)
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
  AND (%(after_run_after)s IS NULL
       OR (run_after, `partition`, local_id)
          < (%(after_run_after)s, %(after_partition)s, %(after_local_id)s))
ORDER BY run_after DESC, `partition` DESC, local_id DESC
LIMIT %(limit)s;

-- name: select_jobs
-- Jobs for a bulk action (retryFailedJobs, deleteJobs), oldest first, bodies left out.
SELECT `partition`, local_id, priority, state, CAST('' AS BINARY), attempts_allowed,
       attempts_remaining, custom_status, created_at, run_after, updated_at, claim,
       claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s AND priority = %(priority)s
  AND (%(regex)s IS NULL OR body REGEXP %(regex)s)
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
ORDER BY run_after, `partition`, local_id
LIMIT %(limit)s;

-- name: jobs_from_partition
-- Whether a queue holds any job in partition `first` or above: a closed partition
-- retires only once it holds none (decision 0030). Served by the primary key.
SELECT 1 FROM jobs WHERE queue = %(queue)s AND `partition` >= %(first)s
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s)) LIMIT 1;

-- name: expired_jobs
-- Finished jobs of one partition past their TTL, for the owner's garbage collection.
SELECT local_id, priority, state, CAST('' AS BINARY), attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s
  AND ((state = 2 AND updated_at <= %(succeeded_before)s)
       OR (state = 3 AND updated_at <= %(failed_before)s))
LIMIT %(limit)s;

-- name: job_counts
-- Jobs by queue, state and priority, per partition: what replay prints as a summary
-- (the store sums the partitions, leaving out those it hides).
SELECT queue, `partition`, state, priority, count(*) FROM jobs
GROUP BY queue, state, priority, `partition`
ORDER BY queue, state, priority, `partition`;

-- name: last_event_time
-- The time of the newest event projected for a queue (NULL: none).
SELECT max(at) FROM job_events
WHERE queue = %(queue)s AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s));

-- name: queue_counts_as_of
-- `replay --as-of`: one queue's jobs by state and priority, split as getJobCount
-- splits them: due (run_after <= now) or future.
SELECT state, priority, run_after > %(now)s AS future, count(*)
FROM jobs
WHERE queue = %(queue)s AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
GROUP BY state, priority, future
ORDER BY state, priority, future;

-- name: due_jobs_in_dequeue_order
SELECT `partition`, local_id, priority, run_after
FROM jobs
WHERE queue = %(queue)s AND state = 0 AND run_after <= %(now)s
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
ORDER BY priority, run_after, local_id, `partition`
LIMIT %(limit)s;

-- name: diff_rows
-- Rows of {table} in database {left} that database {right} lacks (compared column by
-- column), limited to the replayed queues and, when given, one partition.
SELECT * FROM (
    SELECT * FROM {left}.{table} WHERE {queue_column} IN %(queues)s
        AND (%(partition)s IS NULL OR {partition_column} = %(partition)s)
    EXCEPT ALL
    SELECT * FROM {right}.{table} WHERE {queue_column} IN %(queues)s
        AND (%(partition)s IS NULL OR {partition_column} = %(partition)s)
) AS l
LIMIT %(limit)s;

-- name: diff_count
SELECT count(*) FROM (
    SELECT * FROM {left}.{table} WHERE {queue_column} IN %(queues)s
        AND (%(partition)s IS NULL OR {partition_column} = %(partition)s)
    EXCEPT ALL
    SELECT * FROM {right}.{table} WHERE {queue_column} IN %(queues)s
        AND (%(partition)s IS NULL OR {partition_column} = %(partition)s)
) AS d;

-- name: find_jobs
-- The dashboard's job finder, as scan_jobs with bodies and a custom-status regex.
SELECT `partition`, local_id, priority, state, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, body, unique_key
FROM jobs
WHERE queue = %(queue)s AND state = %(state)s
  AND (%(priority)s IS NULL OR priority = %(priority)s)
  AND (%(body_regex)s IS NULL OR body REGEXP %(body_regex)s)
  AND (%(status_regex)s IS NULL OR custom_status REGEXP %(status_regex)s)
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
  AND (%(after_run_after)s IS NULL
       OR (run_after, `partition`, local_id)
          < (%(after_run_after)s, %(after_partition)s, %(after_local_id)s))
ORDER BY run_after DESC, `partition` DESC, local_id DESC
LIMIT %(limit)s;

-- name: oldest_due
-- The dashboard's "oldest due job": one minimum per priority (a loose scan of
-- jobs_by_state, no LATERAL in MariaDB), then the smallest.
SELECT min(first_due) FROM (
    SELECT min(run_after) AS first_due FROM jobs
    WHERE queue = %(queue)s AND state = 0 AND priority BETWEEN 1 AND %(priorities)s
      AND run_after <= %(now)s AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
    GROUP BY priority
) AS per_priority;

-- name: event_buckets
-- The dashboard's rates, on the job_events_by_type index.
SELECT %(since)s + ((at - %(since)s) DIV %(bucket_ms)s) * %(bucket_ms)s AS start, type,
       count(*)
FROM job_events
WHERE queue = %(queue)s AND type IN %(types)s AND at >= %(since)s AND at < %(until)s
  AND applied AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
GROUP BY 1, 2
ORDER BY 1, 2;

-- name: queue_tally
-- The dashboard's overview, as Postgres counts it: IN over the priorities makes one
-- range of jobs_by_state per priority with run_after as its bound. The index is forced:
-- MariaDB may otherwise walk the queue's primary key with a filter, every job of the
-- queue when fewer than the cap match.
SELECT
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs FORCE INDEX (jobs_by_state)
        WHERE queue = %(queue)s AND state = 0 AND priority IN %(priority_list)s
          AND run_after <= %(now)s AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
        LIMIT %(cap)s) AS due),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs FORCE INDEX (jobs_by_state)
        WHERE queue = %(queue)s AND state = 0 AND priority IN %(priority_list)s
          AND run_after > %(now)s AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
        LIMIT %(cap)s) AS future),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs FORCE INDEX (jobs_by_state)
        WHERE queue = %(queue)s AND state = 1 AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
        LIMIT %(cap)s) AS running),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs FORCE INDEX (jobs_by_state)
        WHERE queue = %(queue)s AND state = 2 AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
        LIMIT %(cap)s) AS succeeded),
    (SELECT count(*) FROM (
        SELECT 1 FROM jobs FORCE INDEX (jobs_by_state)
        WHERE queue = %(queue)s AND state = 3 AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
        LIMIT %(cap)s) AS failed);

-- name: day_partitions
-- The partitions of job_events with their upper bounds, in order: day partitions
-- (job_events_pYYYYMMDD, [bound - 1 day, bound)) and gaps (job_events_gYYYYMMDD, up to
-- the day the name says); see projections/mysql/day_partitions.py.
SELECT PARTITION_NAME, PARTITION_DESCRIPTION
FROM information_schema.PARTITIONS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'job_events'
ORDER BY PARTITION_ORDINAL_POSITION;

-- name: lock_day_partitions
-- Changing partitions takes turns between the processes sharing a database; 0 after
-- 5 s: another holds it (the pass fails and is retried).
SELECT GET_LOCK(CONCAT(DATABASE(), '.job_events partitions'), 5);

-- name: unlock_day_partitions
SELECT RELEASE_LOCK(CONCAT(DATABASE(), '.job_events partitions'));

-- name: day_partitions_lock_timeout
-- Partition DDL waits at most this long for job_events' metadata lock, then fails (and
-- is retried) rather than queue every reader and writer of the timeline behind it.
SET SESSION lock_wait_timeout = 5;

-- name: default_lock_timeout
SET SESSION lock_wait_timeout = DEFAULT;

-- name: partition_definition
-- One partition in the DDL below (bound: an integer, composed by day_partitions.py).
PARTITION {partition} VALUES LESS THAN ({bound});

-- name: add_day_partitions
-- Partitions above the highest bound: a plain ADD, no rows move.
ALTER TABLE job_events ADD PARTITION ({definitions});

-- name: split_day_partition
-- A gap partition split around a new day: only the gap's rows are copied (normally
-- none: rows are written after their day's partition exists).
ALTER TABLE job_events REORGANIZE PARTITION {partition} INTO ({definitions});

-- name: truncate_day_partition
-- Empties a whole partition (a quick DDL, never a DELETE of rows).
ALTER TABLE job_events TRUNCATE PARTITION {partition};

-- name: drop_day_partitions
ALTER TABLE job_events DROP PARTITION {partitions};

-- name: describe_columns
-- The database's shape, for tests/integration/test_schema_mysql.py (schema.sql and
-- the migrations agree). The migration runner's own table is left out.
SELECT TABLE_NAME, COLUMN_NAME, COLUMN_TYPE, IS_NULLABLE, COLUMN_DEFAULT, COLLATION_NAME
FROM information_schema.COLUMNS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME <> 'schema_migrations'
ORDER BY TABLE_NAME, COLUMN_NAME;

-- name: describe_indexes
SELECT TABLE_NAME, INDEX_NAME, NON_UNIQUE, SEQ_IN_INDEX, COLUMN_NAME
FROM information_schema.STATISTICS
WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME <> 'schema_migrations'
ORDER BY TABLE_NAME, INDEX_NAME, SEQ_IN_INDEX;

-- name: describe_constraints
SELECT TABLE_NAME, CONSTRAINT_NAME, CHECK_CLAUSE
FROM information_schema.CHECK_CONSTRAINTS
WHERE CONSTRAINT_SCHEMA = DATABASE()
ORDER BY TABLE_NAME, CONSTRAINT_NAME;

-- name: describe_partitioning
SELECT DISTINCT TABLE_NAME, PARTITION_METHOD, PARTITION_EXPRESSION
FROM information_schema.PARTITIONS
WHERE TABLE_SCHEMA = DATABASE() AND PARTITION_METHOD IS NOT NULL
ORDER BY TABLE_NAME;

-- name: stream_jobs
-- The verify's live side (projections/verify.py): a partition's jobs in a range of local
-- ids, by local id (the primary key's order), read unbuffered so the reader's memory
-- does not grow with the partition.
SELECT local_id, priority, state, body, attempts_allowed, attempts_remaining,
       custom_status, created_at, run_after, updated_at, claim, claim_source, touched_at,
       traceparent
FROM jobs
WHERE queue = %(queue)s AND `partition` = %(partition)s
  AND local_id >= %(lo)s AND local_id < %(hi)s
ORDER BY local_id;

-- name: stream_events
-- The verify's live side: a partition's timeline from an offset on, in log order (the
-- order the fold produces it), read unbuffered.
SELECT local_id, `offset`, idx, type, at, source, request_id, server, claim, applied,
       verdict, state_after, attempts_remaining_after, detail, traceparent
FROM job_events
WHERE queue = %(queue)s AND `partition` = %(partition)s AND `offset` >= %(from_offset)s
ORDER BY `offset`, idx, local_id, at;

-- name: end_session
-- A logout: the session's digest, until its cookie would have expired anyway.
INSERT IGNORE INTO ended_sessions (id, until_ms) VALUES (%(id)s, %(until)s);

-- name: forget_partition_offset
-- A partition moved to another store shard (decision 0031): its offset row here goes
-- first, so that a projector still writing here is fenced (PartitionGoneError).
DELETE FROM partition_offsets WHERE topic = %(topic)s AND `partition` = %(partition)s;

-- name: moved_jobs_batch_end
-- The rows of a partition moved away are deleted in batches of `limit`, in key order.
SELECT max(local_id) FROM (
    SELECT local_id FROM jobs WHERE queue = %(queue)s AND `partition` = %(partition)s
    ORDER BY local_id LIMIT %(limit)s) AS batch;

-- name: remove_moved_jobs
DELETE FROM jobs WHERE queue = %(queue)s AND `partition` = %(partition)s AND local_id <= %(upto)s;

-- name: moved_job_events_batch_end
SELECT max(local_id) FROM (
    SELECT local_id FROM job_events WHERE queue = %(queue)s AND `partition` = %(partition)s
    ORDER BY local_id LIMIT %(limit)s) AS batch;

-- name: remove_moved_job_events
DELETE FROM job_events
WHERE queue = %(queue)s AND `partition` = %(partition)s AND local_id <= %(upto)s;

-- name: moved_imported_batch_end
-- Through imported_by_partition (migrations/mysql/0007), named: MariaDB's plan walked the
-- primary key in order instead, reading the queue's other partitions' rows on the way.
SELECT max(old_descriptor) FROM (
    SELECT old_descriptor FROM imported_descriptors FORCE INDEX (imported_by_partition)
    WHERE queue = %(queue)s AND `partition` = %(partition)s
    ORDER BY old_descriptor LIMIT %(limit)s) AS batch;

-- name: remove_moved_imported
-- The multi-table form, the one that takes an index hint (as above: else a range of the
-- primary key from the queue's first descriptor, every batch).
DELETE d FROM imported_descriptors AS d FORCE INDEX (imported_by_partition)
WHERE d.queue = %(queue)s AND d.`partition` = %(partition)s AND d.old_descriptor <= %(upto)s;

-- name: schema_table_bytes
-- Each table of the database with its data and index bytes (InnoDB's pages, a
-- partitioned table's partitions summed), as the last ANALYZE TABLE left them:
-- bench/sizing.py's bytes per job.
SELECT table_name, coalesce(data_length, 0), coalesce(index_length, 0)
FROM information_schema.tables
WHERE table_schema = DATABASE() AND table_type = 'BASE TABLE';

-- name: analyze_table
-- InnoDB's statistics (information_schema's sizes among them) brought up to date.
ANALYZE TABLE {table};

-- name: claim_holders
-- The dashboard's workers view (issue 42): per claim source (the RequestContext source of
-- the worker that dequeued), the queue's IN_PROGRESS jobs it holds and its last heartbeat
-- (the latest claim taken or renewed), the most jobs first; on the index of claimed jobs
-- (jobs_claimed), bounded by %(limit)s sources.
SELECT claim_source, count(*) AS held, max(touched_at) AS last_heartbeat FROM jobs
WHERE queue = %(queue)s AND state = 1
  AND (%(away)s = '' OR NOT FIND_IN_SET(`partition`, %(away)s))
GROUP BY claim_source
ORDER BY held DESC, claim_source
LIMIT %(limit)s;
