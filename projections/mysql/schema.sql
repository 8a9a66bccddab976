-- The MySQL/MariaDB projection schema: what every file of migrations/mysql/ applied in
-- order produces, in one place to read (tests/integration/test_schema_mysql.py checks
-- that they agree, as tests/integration/test_schema.py does for projections/pg/
-- schema.sql). Change the schema with a new migration, then change this file to match.
-- (schema_migrations, the list of applied migrations, is kept by the migration runner,
-- projections/mysql/connection.py.)
--
-- Text columns compare byte by byte (utf8mb4_bin), as Postgres text does in the C
-- locale; the CHECKs mirror the invariants of ledger/state.py as on Postgres. MariaDB
-- has no partial indexes: the indexes of the ready window and the claim timeouts
-- (decision 0014) hold every row, with `state` as a key column instead of a WHERE.

CREATE TABLE queues (
    name        VARCHAR(255) NOT NULL PRIMARY KEY,
    partitions  INT          NOT NULL CHECK (partitions > 0),
    created_at  BIGINT       NOT NULL,
    -- Partitions 0 .. open_partitions - 1 take new jobs; NULL: all (decision 0030).
    open_partitions INT NULL CHECK (open_partitions > 0),
    -- Partitions retired_from and above are retired: drained, empty, no owner work;
    -- NULL: none (decision 0030).
    retired_from INT NULL CHECK (retired_from >= 0),
    -- Paused from the catalog: dequeues hand out none of its jobs (decision 0035).
    paused BOOLEAN NOT NULL DEFAULT FALSE
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Which store shard each partition's projection is placed on (decision 0031); a
-- partition without a row is on the home shard (migrations/mysql/0006).
CREATE TABLE partition_placements (
    queue        VARCHAR(255) NOT NULL,
    `partition`  INT          NOT NULL CHECK (`partition` >= 0),
    shard        VARCHAR(255) NOT NULL,
    PRIMARY KEY (queue, `partition`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Queue records an operator skipped (`pinledger skip-record`, decision 0032): every
-- projector of the partition passes over the record at `record_offset`
-- (migrations/mysql/0008).
CREATE TABLE skipped_records (
    queue          VARCHAR(255) NOT NULL,
    `partition`    INT          NOT NULL CHECK (`partition` >= 0),
    record_offset  BIGINT       NOT NULL CHECK (record_offset >= 0),
    reason         TEXT         NOT NULL,
    PRIMARY KEY (queue, `partition`, record_offset)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The latest tick of each periodic job's schedule (`ScheduleTicked`, decision 0038):
-- `tick_ms` when the tick was due (only ever rises), `job` the descriptor of the job it
-- enqueued ('' where the schedule began), `at_ms` the time of the catalog record that
-- set it (migrations/mysql/0012).
CREATE TABLE schedule_ticks (
    queue     VARCHAR(255) NOT NULL,
    schedule  VARCHAR(255) NOT NULL,
    tick_ms   BIGINT       NOT NULL,
    job       TEXT         NOT NULL,
    at_ms     BIGINT       NOT NULL,
    PRIMARY KEY (queue, schedule)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Current state of every job that has not been deleted or garbage collected.
CREATE TABLE jobs (
    queue               VARCHAR(255) NOT NULL,
    `partition`         INT          NOT NULL,
    local_id            BIGINT       NOT NULL,
    priority            SMALLINT     NOT NULL,
    -- JobState: PENDING, IN_PROGRESS, SUCCEEDED, FAILED.
    state               SMALLINT     NOT NULL CHECK (state BETWEEN 0 AND 3),
    body                LONGBLOB     NOT NULL,
    attempts_allowed    INT          NOT NULL,
    attempts_remaining  INT          NOT NULL,
    custom_status       TEXT         NOT NULL,
    created_at          BIGINT       NOT NULL,
    run_after           BIGINT       NOT NULL,
    updated_at          BIGINT       NOT NULL,
    claim               TEXT,
    claim_source        TEXT,
    touched_at          BIGINT,
    -- W3C trace context of the enqueue call, so later spans can link to it.
    traceparent         TEXT,
    -- A unique job's key (decision 0037, migrations/mysql/0010); NULL: none.
    unique_key          VARCHAR(255),
    PRIMARY KEY (queue, `partition`, local_id),
    -- Serves getJobCount and scanJobs: one queue, one state, by priority and run_after.
    INDEX jobs_by_state (queue, state, priority, run_after),
    -- Serves the owners' garbage collection: finished jobs of one partition by age.
    INDEX jobs_finished (queue, `partition`, state, updated_at),
    -- Serves the owners' ready windows: PENDING jobs of one partition and priority in
    -- dequeue order (docs/decisions/0014-ready-window.md).
    INDEX jobs_ready (queue, `partition`, state, priority, run_after, local_id),
    -- Serves the owners' claim timeouts: IN_PROGRESS jobs of one partition by last touch.
    INDEX jobs_claimed (queue, `partition`, state, touched_at),
    -- Serves the fold of a keyed enqueue: one partition's jobs of a key.
    INDEX jobs_by_key (queue, `partition`, unique_key),
    CONSTRAINT attempts_in_range CHECK (0 <= attempts_remaining AND attempts_remaining <= attempts_allowed),
    CONSTRAINT claimed_iff_in_progress CHECK ((state = 1) = (claim IS NOT NULL)),
    CONSTRAINT claim_fields_together CHECK ((claim IS NULL) = (touched_at IS NULL)
                                            AND (claim IS NULL) = (claim_source IS NULL))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The per-job timeline: one row per event that named the job, applied or rejected.
-- Partitioned by range on `at`: day partitions job_events_pYYYYMMDD and gap partitions
-- job_events_gYYYYMMDD between them, made by the store before a day's first event is
-- written and dropped whole by the history retention (projections/mysql/history.py).
-- A new table has one gap, below 1970-01-01.
CREATE TABLE job_events (
    queue               VARCHAR(255) NOT NULL,
    `partition`         INT          NOT NULL,
    local_id            BIGINT       NOT NULL,
    `offset`            BIGINT       NOT NULL,
    idx                 INT          NOT NULL,
    -- The codec's tag of the event type (ledger/codec.py EVENT_TAGS).
    type                VARCHAR(8)   NOT NULL,
    at                  BIGINT       NOT NULL,
    source              TEXT         NOT NULL,
    request_id          TEXT         NOT NULL,
    server              TEXT         NOT NULL,
    claim               TEXT,
    applied             BOOLEAN      NOT NULL,
    -- "applied", or "rejected: <why>" (ledger/state.py Verdict).
    verdict             TEXT         NOT NULL,
    state_after         SMALLINT,
    attempts_remaining_after INT,
    detail              JSON         NOT NULL,
    traceparent         TEXT,
    -- `at` is in the key because MariaDB wants the partition key in every unique index.
    PRIMARY KEY (queue, `partition`, local_id, `offset`, idx, at),
    -- Serves the dashboard's rates: one queue's events of one type over a time range.
    INDEX job_events_by_type (queue, type, at),
    -- No CHECK of the type: MariaDB cannot add one online (migration 0011); the
    -- projection writes only the codec's tags.
    CONSTRAINT state_after_known CHECK (state_after BETWEEN 0 AND 3),
    CONSTRAINT job_after_together CHECK
        ((state_after IS NULL) = (attempts_remaining_after IS NULL)),
    CONSTRAINT applied_iff_verdict CHECK (applied = (verdict = 'applied'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin
PARTITION BY RANGE (at) (PARTITION job_events_g19700101 VALUES LESS THAN (0));

-- How far each partition (and the catalog) has been projected: written in the same
-- transaction as the rows it covers, moved only by compare-and-set (decision 0010).
CREATE TABLE partition_offsets (
    topic        VARCHAR(255) NOT NULL,
    `partition`  INT          NOT NULL,
    next_offset  BIGINT       NOT NULL CHECK (next_offset >= 0),
    PRIMARY KEY (topic, `partition`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- The PinLater descriptors of imported jobs (`pinledger import-pinlater`), so that
-- lookupJobs and getJobHistory accept them: projected from the `imported_from` of the
-- jobs' Enqueued events (docs/decisions/0017-imported-descriptors.md).
CREATE TABLE imported_descriptors (
    queue           VARCHAR(255) NOT NULL,
    -- The job's PinLater descriptor, as PinLater wrote it.
    old_descriptor  VARCHAR(400) NOT NULL,
    `partition`     INT          NOT NULL,
    local_id        BIGINT       NOT NULL,
    priority        SMALLINT     NOT NULL,
    PRIMARY KEY (queue, old_descriptor),
    -- One partition's, in key order: the clean-up after a move (migrations/mysql/0007).
    INDEX imported_by_partition (queue, `partition`, old_descriptor)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

-- Dashboard sessions ended by a logout before their time (migrations/mysql/0003).
CREATE TABLE ended_sessions (
    -- A digest of the session's cookie, never the cookie itself.
    id        VARCHAR(64) NOT NULL PRIMARY KEY,
    until_ms  BIGINT      NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
