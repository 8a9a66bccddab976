-- pinledger: online
-- The latest tick of each periodic job's schedule (`schedules` in the queue config),
-- projected from the catalog's ScheduleTicked records (decision 0038): the catalog
-- owner's schedules duty reads where each schedule stands after a failover, so that a
-- tick is neither enqueued twice nor skipped. A new table: no lock on any other.
CREATE TABLE schedule_ticks (
    queue     text    NOT NULL,
    schedule  text    NOT NULL,
    -- When the tick was due (wall clock, ms); only ever rises.
    tick_ms   bigint  NOT NULL,
    -- The descriptor of the job the tick enqueued; '' where the schedule began.
    job       text    NOT NULL,
    -- The time of the catalog record that set the tick.
    at_ms     bigint  NOT NULL,
    PRIMARY KEY (queue, schedule)
);
