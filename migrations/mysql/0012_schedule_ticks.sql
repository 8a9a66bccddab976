-- pinledger: online
-- The latest tick of each periodic job's schedule (decision 0038), as Postgres's
-- migrations/0018_schedule_ticks.sql.
CREATE TABLE IF NOT EXISTS schedule_ticks (
    queue     VARCHAR(255) NOT NULL,
    schedule  VARCHAR(255) NOT NULL,
    tick_ms   BIGINT       NOT NULL,
    job       TEXT         NOT NULL,
    at_ms     BIGINT       NOT NULL,
    PRIMARY KEY (queue, schedule)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
