-- pinledger: online
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
