-- pinledger: online
-- Queue records an operator skipped (`pinledger skip-record`, decision 0032), projected
-- from the catalog's RecordSkipped records: every projector of the partition passes
-- over the record at `record_offset`. A new table: no lock on any other.
CREATE TABLE skipped_records (
    queue          text    NOT NULL,
    partition      integer NOT NULL CHECK (partition >= 0),
    record_offset  bigint  NOT NULL CHECK (record_offset >= 0),
    reason         text    NOT NULL,
    PRIMARY KEY (queue, partition, record_offset)
);
