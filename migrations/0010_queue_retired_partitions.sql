-- pinledger: online
-- From which partition on a queue's partitions are retired (decision 0030): drained after
-- a resize closed them, empty, and left out of the owners' work, dequeues and counts'
-- barrier. NULL: none. A new nullable column without a default: no table rewrite.
ALTER TABLE queues ADD COLUMN retired_from integer CHECK (retired_from >= 0);
