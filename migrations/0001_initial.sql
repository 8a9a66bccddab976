-- pinledger: online
-- (New tables in a new schema: nothing else holds them.)
-- The projection schema: tables derived from the log, rebuildable from it at any time
-- (`pinledger replay`). Times are milliseconds since the Unix epoch, as in the events.

CREATE TABLE queues (
    name        text    PRIMARY KEY,
    partitions  integer NOT NULL CHECK (partitions > 0),
    created_at  bigint  NOT NULL
);

-- Current state of every job that has not been deleted or garbage collected.
-- The CHECKs mirror the invariants of ledger/state.py.
CREATE TABLE jobs (
    queue               text     NOT NULL,
    partition           integer  NOT NULL,
    local_id            bigint   NOT NULL,
    priority            smallint NOT NULL,
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
    PRIMARY KEY (queue, partition, local_id),
    CONSTRAINT attempts_in_range CHECK (0 <= attempts_remaining AND attempts_remaining <= attempts_allowed),
    CONSTRAINT claimed_iff_in_progress CHECK ((state = 1) = (claim IS NOT NULL)),
    CONSTRAINT claim_fields_together CHECK ((claim IS NULL) = (touched_at IS NULL)
                                            AND (claim IS NULL) = (claim_source IS NULL))
);

-- Serves getJobCount and scanJobs: one queue, one state, by priority and run_after.
CREATE INDEX jobs_by_state ON jobs (queue, state, priority, run_after);

-- The per-job timeline: one row per event that named the job, applied or rejected.
CREATE TABLE job_events (
    queue               text     NOT NULL,
    partition           integer  NOT NULL,
    local_id            bigint   NOT NULL,
    "offset"            bigint   NOT NULL,
    idx                 integer  NOT NULL,
    type                text     NOT NULL,
    at                  bigint   NOT NULL,
    source              text     NOT NULL,
    request_id          text     NOT NULL,
    server              text     NOT NULL,
    claim               text,
    applied             boolean  NOT NULL,
    verdict             text     NOT NULL,
    -- The job after the event; NULL state when the event removed it.
    state_after         smallint,
    attempts_remaining_after integer,
    detail              jsonb    NOT NULL,
    traceparent         text,
    PRIMARY KEY (queue, partition, local_id, "offset", idx)
);

-- How far each partition has been projected: written in the same transaction as the
-- rows it covers, so a record at or below it is never applied twice. `epoch` fences a
-- stale owner (compare-and-set on next_offset as well).
CREATE TABLE partition_offsets (
    topic        text    NOT NULL,
    partition    integer NOT NULL,
    next_offset  bigint  NOT NULL CHECK (next_offset >= 0),
    epoch        bigint  NOT NULL DEFAULT 0,
    PRIMARY KEY (topic, partition)
);
