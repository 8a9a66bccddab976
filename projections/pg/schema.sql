-- The projection schema: what every file of migrations/ applied in order produces, in
-- one place to read (tests/integration/test_schema.py checks that they agree). Change
-- the schema with a new migration, then change this file to match.
--
-- Tables derived from the log, rebuildable from it at any time (`pinledger replay`).
-- Times are milliseconds since the Unix epoch, as in the events. The CHECKs mirror the
-- invariants of ledger/state.py. (schema_migrations, the list of applied migrations,
-- is kept by the migration runner, projections/pg/connection.py.)

CREATE TABLE queues (
    name        text    PRIMARY KEY,
    partitions  integer NOT NULL CHECK (partitions > 0),
    created_at  bigint  NOT NULL,
    -- Partitions 0 .. open_partitions - 1 take new jobs; NULL: all (decision 0030).
    open_partitions integer CHECK (open_partitions > 0),
    -- Partitions retired_from and above are retired: drained, empty, no owner work;
    -- NULL: none (decision 0030).
    retired_from integer CHECK (retired_from >= 0),
    -- Paused from the catalog: dequeues hand out none of its jobs (decision 0035).
    paused boolean NOT NULL DEFAULT false
);

-- Which store shard each partition's projection is placed on (decision 0031); a
-- partition without a row is on the home shard (migrations/0011).
CREATE TABLE partition_placements (
    queue      text    NOT NULL,
    partition  integer NOT NULL CHECK (partition >= 0),
    shard      text    NOT NULL,
    PRIMARY KEY (queue, partition)
);

-- Queue records an operator skipped (`pinledger skip-record`, decision 0032): every
-- projector of the partition passes over the record at `record_offset`
-- (migrations/0013).
CREATE TABLE skipped_records (
    queue          text    NOT NULL,
    partition      integer NOT NULL CHECK (partition >= 0),
    record_offset  bigint  NOT NULL CHECK (record_offset >= 0),
    reason         text    NOT NULL,
    PRIMARY KEY (queue, partition, record_offset)
);

-- The latest tick of each periodic job's schedule (`ScheduleTicked`, decision 0038):
-- `tick_ms` when the tick was due (only ever rises), `job` the descriptor of the job it
-- enqueued ('' where the schedule began), `at_ms` the time of the catalog record that
-- set it (migrations/0018).
CREATE TABLE schedule_ticks (
    queue     text    NOT NULL,
    schedule  text    NOT NULL,
    tick_ms   bigint  NOT NULL,
    job       text    NOT NULL,
    at_ms     bigint  NOT NULL,
    PRIMARY KEY (queue, schedule)
);

-- Current state of every job that has not been deleted or garbage collected.
CREATE TABLE jobs (
    queue               text     NOT NULL,
    partition           integer  NOT NULL,
    local_id            bigint   NOT NULL,
    priority            smallint NOT NULL,
    -- JobState: PENDING, IN_PROGRESS, SUCCEEDED, FAILED.
    state               smallint NOT NULL CHECK (state BETWEEN 0 AND 3),
    body                bytea    NOT NULL,
    attempts_allowed    integer  NOT NULL,
    attempts_remaining  integer  NOT NULL,
    custom_status       text     NOT NULL,
    created_at          bigint   NOT NULL,
    run_after           bigint   NOT NULL,
    updated_at          bigint   NOT NULL,
    claim               text,
    claim_source        text,
    touched_at          bigint,
    -- W3C trace context of the enqueue call, so later spans can link to it.
    traceparent         text,
    -- A unique job's key (decision 0037, migrations/0015); NULL: none.
    unique_key          text,
    PRIMARY KEY (queue, partition, local_id),
    CONSTRAINT attempts_in_range CHECK (0 <= attempts_remaining AND attempts_remaining <= attempts_allowed),
    CONSTRAINT claimed_iff_in_progress CHECK ((state = 1) = (claim IS NOT NULL)),
    CONSTRAINT claim_fields_together CHECK ((claim IS NULL) = (touched_at IS NULL)
                                            AND (claim IS NULL) = (claim_source IS NULL))
);

-- Serves getJobCount and scanJobs: one queue, one state, by priority and run_after.
CREATE INDEX jobs_by_state ON jobs (queue, state, priority, run_after);
-- Serves the owners' garbage collection: finished jobs of one partition by age.
CREATE INDEX jobs_finished ON jobs (queue, partition, state, updated_at) WHERE state >= 2;
-- Serves the owners' ready windows: PENDING jobs of one partition and priority in
-- dequeue order (docs/decisions/0014-ready-window.md).
CREATE INDEX jobs_ready ON jobs (queue, partition, priority, run_after, local_id) WHERE state = 0;
-- Serves the owners' claim timeouts: IN_PROGRESS jobs of one partition by last touch.
CREATE INDEX jobs_claimed ON jobs (queue, partition, touched_at) WHERE state = 1;
-- Serves the fold of a keyed enqueue: one partition's jobs of a key (migrations/0016).
CREATE INDEX jobs_by_key ON jobs (queue, partition, unique_key) WHERE unique_key IS NOT NULL;

-- The per-job timeline: one row per event that named the job, applied or rejected.
-- Partitioned by range on `at`, one partition per UTC day (job_events_pYYYYMMDD),
-- created by the store before the day's first event is written and dropped whole by
-- the history retention (projections/day_partitions.py; docs/decisions/
-- 0013-history-partitions.md). No DEFAULT partition.
CREATE TABLE job_events (
    queue               text     NOT NULL,
    partition           integer  NOT NULL,
    local_id            bigint   NOT NULL,
    "offset"            bigint   NOT NULL,
    idx                 integer  NOT NULL,
    -- The codec's tag of the event type (ledger/codec.py EVENT_TAGS).
    type                text     NOT NULL,
    at                  bigint   NOT NULL,
    source              text     NOT NULL,
    request_id          text     NOT NULL,
    server              text     NOT NULL,
    claim               text,
    applied             boolean  NOT NULL,
    -- "applied", or "rejected: <why>" (ledger/state.py Verdict).
    verdict             text     NOT NULL,
    -- The job after the event; NULL when the event removed it (or there was none).
    state_after         smallint,
    attempts_remaining_after integer,
    detail              jsonb    NOT NULL,
    traceparent         text,
    -- `at` is in the key because Postgres wants the partition key in every unique index.
    PRIMARY KEY (queue, partition, local_id, "offset", idx, at),
    CONSTRAINT job_event_type CHECK
        (type IN ('enq', 'clm', 'ok', 'fail', 'ckpt', 'tmo', 'rtry', 'del', 'gc', 'cncl')),
    CONSTRAINT state_after_known CHECK (state_after BETWEEN 0 AND 3),
    CONSTRAINT job_after_together CHECK
        ((state_after IS NULL) = (attempts_remaining_after IS NULL)),
    CONSTRAINT applied_iff_verdict CHECK (applied = (verdict = 'applied'))
) PARTITION BY RANGE (at);

-- Serves the dashboard's rates: one queue's events of one type over a time range.
CREATE INDEX job_events_by_type ON job_events (queue, type, at);

-- The PinLater descriptors of imported jobs (`pinledger import-pinlater`), so that
-- lookupJobs and getJobHistory accept them: projected from the `imported_from` of the
-- jobs' Enqueued events (docs/decisions/0017-imported-descriptors.md).
CREATE TABLE imported_descriptors (
    queue           text     NOT NULL,
    -- The job's PinLater descriptor, as PinLater wrote it.
    old_descriptor  text     NOT NULL,
    partition       integer  NOT NULL,
    local_id        bigint   NOT NULL,
    priority        smallint NOT NULL,
    PRIMARY KEY (queue, old_descriptor)
);
-- One partition's, in key order: the clean-up after a move (migrations/0012).
CREATE INDEX imported_by_partition ON imported_descriptors (queue, partition, old_descriptor);

-- Dashboard sessions ended by a logout before their time (migrations/0008).
CREATE TABLE ended_sessions (
    -- A digest of the session's cookie, never the cookie itself.
    id        text    NOT NULL PRIMARY KEY,
    until_ms  bigint  NOT NULL
);

-- How far each partition (and the catalog, partition 0 of its topic) has been
-- projected: written in the same transaction as the rows it covers, and moved only by
-- compare-and-set from the offset a batch started at. That compare-and-set is the
-- fence between two projectors of one partition (decision 0010).
CREATE TABLE partition_offsets (
    topic        text    NOT NULL,
    partition    integer NOT NULL,
    next_offset  bigint  NOT NULL CHECK (next_offset >= 0),
    PRIMARY KEY (topic, partition)
);
