-- The reads of `pinledger import-pinlater` on a PinLater MySQL deployment, by name
-- (loaded by projections/mysql/sql.py; parameters and identifiers as in queries.sql).
-- PinLater keeps a queue's jobs of one shard in the database plq_<shard>_<queue>, one
-- table per priority, jobs_p<priority>; its times are TIMESTAMP columns.

-- name: pinlater_databases
SELECT SCHEMA_NAME FROM information_schema.SCHEMATA
WHERE SCHEMA_NAME LIKE 'plq\_%%'
ORDER BY SCHEMA_NAME;

-- name: pinlater_tables
SELECT TABLE_NAME FROM information_schema.TABLES
WHERE TABLE_SCHEMA = %(db)s AND TABLE_NAME LIKE 'jobs\_p%%'
ORDER BY TABLE_NAME;

-- name: count_jobs
SELECT count(*) FROM {db}.{table};

-- name: create_import_map
-- The importer's own table in each PinLater database: which job went to which
-- pinledger descriptor. A job listed here is not imported again.
CREATE TABLE IF NOT EXISTS {db}.pinledger_import (
    priority     INT          NOT NULL,
    local_id     BIGINT       NOT NULL,
    descriptor   VARCHAR(300) NOT NULL,
    imported_at  TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
    PRIMARY KEY (priority, local_id)
) ENGINE=InnoDB;

-- name: jobs_to_import
-- A page of a priority's jobs not imported yet, by local_id, up to the largest id the
-- importer reserved room for (jobs PinLater took since wait for the next run); times
-- as epoch ms.
SELECT j.local_id, j.state, j.claim_descriptor, j.attempts_allowed,
       j.attempts_remaining, j.custom_status,
       CAST(ROUND(UNIX_TIMESTAMP(j.created_at) * 1000) AS SIGNED),
       CAST(ROUND(UNIX_TIMESTAMP(j.run_after) * 1000) AS SIGNED),
       CAST(ROUND(UNIX_TIMESTAMP(j.updated_at) * 1000) AS SIGNED),
       j.body
FROM {db}.{table} AS j
LEFT JOIN {db}.pinledger_import AS m
  ON m.priority = %(priority)s AND m.local_id = j.local_id
WHERE j.local_id > %(after)s AND j.local_id <= %(upto)s AND m.local_id IS NULL
ORDER BY j.local_id
LIMIT %(limit)s;

-- name: record_import
INSERT INTO {db}.pinledger_import (priority, local_id, descriptor)
VALUES (%(priority)s, %(local_id)s, %(descriptor)s);

-- name: imported_descriptor
-- The pinledger descriptor a PinLater job was imported as.
SELECT descriptor FROM {db}.pinledger_import
WHERE priority = %(priority)s AND local_id = %(local_id)s;

-- name: pending_range
-- The smallest and largest local_id of a priority's jobs not imported yet.
SELECT min(j.local_id), max(j.local_id)
FROM {db}.{table} AS j
LEFT JOIN {db}.pinledger_import AS m
  ON m.priority = %(priority)s AND m.local_id = j.local_id
WHERE m.local_id IS NULL;

-- name: pending_among
-- Which of these local_ids are jobs of the priority not imported yet.
SELECT j.local_id
FROM {db}.{table} AS j
LEFT JOIN {db}.pinledger_import AS m
  ON m.priority = %(priority)s AND m.local_id = j.local_id
WHERE j.local_id IN %(ids)s AND m.local_id IS NULL
ORDER BY j.local_id;
