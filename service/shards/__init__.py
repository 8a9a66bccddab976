"""Store shards (decision 0031): the shard map, where a new partition's projection goes,
and moving a partition between shards. The store that spans them is
projections/sharded_store.py, behind the store port."""
