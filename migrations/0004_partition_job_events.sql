-- pinledger: pause "copies job_events into a new partitioned table, holding the old one locked against writes for the whole copy"
-- job_events becomes a table partitioned by range on `at` (epoch ms), one partition per
-- UTC day named job_events_pYYYYMMDD (projections/history_partitions.py), so a history
-- retention drops whole partitions instead of deleting rows
-- (docs/decisions/0013-history-partitions.md). The primary key gains `at`: Postgres
-- wants the partition key in every unique index. There is no DEFAULT partition: the
-- store creates a day's partition before it writes the day's first event.

ALTER TABLE job_events RENAME TO job_events_unpartitioned;
ALTER INDEX job_events_pkey RENAME TO job_events_unpartitioned_pkey;

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
    state_after         smallint,
    attempts_remaining_after integer,
    detail              jsonb    NOT NULL,
    traceparent         text,
    PRIMARY KEY (queue, partition, local_id, "offset", idx, at),
    CONSTRAINT job_event_type CHECK
        (type IN ('enq', 'clm', 'ok', 'fail', 'ckpt', 'tmo', 'rtry', 'del', 'gc')),
    CONSTRAINT state_after_known CHECK (state_after BETWEEN 0 AND 3),
    CONSTRAINT job_after_together CHECK
        ((state_after IS NULL) = (attempts_remaining_after IS NULL)),
    CONSTRAINT applied_iff_verdict CHECK (applied = (verdict = 'applied'))
) PARTITION BY RANGE (at);

-- One partition for each day the existing rows fall in.
DO $$
DECLARE
    day bigint;
BEGIN
    FOR day IN SELECT DISTINCT floor(at / 86400000.0)::bigint * 86400000
               FROM job_events_unpartitioned LOOP
        EXECUTE format(
            'CREATE TABLE %I PARTITION OF job_events FOR VALUES FROM (%s) TO (%s)',
            'job_events_p' || to_char(to_timestamp(day / 1000.0) AT TIME ZONE 'UTC', 'YYYYMMDD'),
            day, day + 86400000);
    END LOOP;
END
$$;

INSERT INTO job_events SELECT * FROM job_events_unpartitioned;
DROP TABLE job_events_unpartitioned;
