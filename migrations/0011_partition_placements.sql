-- pinledger: online
-- Which store shard each partition's projection is placed on (decision 0031), projected
-- from the catalog's PartitionPlaced records. A partition without a row is on the home
-- shard (the one store without a shard map). A new table: no lock on any other.
CREATE TABLE partition_placements (
    queue      text    NOT NULL,
    partition  integer NOT NULL CHECK (partition >= 0),
    shard      text    NOT NULL,
    PRIMARY KEY (queue, partition)
);
