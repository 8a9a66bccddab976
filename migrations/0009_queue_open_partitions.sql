-- pinledger: online
-- How many of a queue's partitions take new jobs (0 .. open_partitions - 1): a queue
-- resized to fewer partitions drains the rest (decision 0030). NULL: all of them (a
-- queue never resized). A new nullable column without a default: no table rewrite.
ALTER TABLE queues ADD COLUMN open_partitions integer CHECK (open_partitions > 0);
