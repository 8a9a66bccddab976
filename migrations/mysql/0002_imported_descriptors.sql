-- pinledger: online
-- The PinLater descriptors of imported jobs (`pinledger import-pinlater`), so that
-- lookupJobs and getJobHistory accept them: projected from the `imported_from` of the
-- jobs' Enqueued events (docs/decisions/0017-imported-descriptors.md). As Postgres's
-- migrations/0007_imported_descriptors.sql.
CREATE TABLE IF NOT EXISTS imported_descriptors (
    queue           VARCHAR(255) NOT NULL,
    -- The job's PinLater descriptor, as PinLater wrote it.
    old_descriptor  VARCHAR(400) NOT NULL,
    `partition`     INT          NOT NULL,
    local_id        BIGINT       NOT NULL,
    priority        SMALLINT     NOT NULL,
    PRIMARY KEY (queue, old_descriptor)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
