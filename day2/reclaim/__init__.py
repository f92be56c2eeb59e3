"""The notebook reclaim policy (reclaim.idleNotebooks): its evidence, its pure judgement, what it writes, its loop in
the cluster, and the report `gpu-pool claims --reclaimable` prints."""
