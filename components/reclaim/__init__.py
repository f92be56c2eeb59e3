"""The notebook reclaim policy in the cluster (reclaim.idleNotebooks): its names, objects and component."""
