-- pinledger: online
-- Which store shard each partition's projection is placed on, as Postgres's
-- migrations/0011_partition_placements.sql.
CREATE TABLE IF NOT EXISTS partition_placements (
    queue        VARCHAR(255) NOT NULL,
    `partition`  INT          NOT NULL CHECK (`partition` >= 0),
    shard        VARCHAR(255) NOT NULL,
    PRIMARY KEY (queue, `partition`)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
