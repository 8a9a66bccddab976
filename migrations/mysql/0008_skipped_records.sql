-- pinledger: online
-- Queue records an operator skipped (decision 0032), as Postgres's
-- migrations/0013_skipped_records.sql.
CREATE TABLE IF NOT EXISTS skipped_records (
    queue          VARCHAR(255) NOT NULL,
    `partition`    INT          NOT NULL CHECK (`partition` >= 0),
    record_offset  BIGINT       NOT NULL CHECK (record_offset >= 0),
    reason         TEXT         NOT NULL,
    PRIMARY KEY (queue, `partition`, record_offset)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
