"""`gpu-pool doctor`: a GPU node's floors from the driver up, and the in-cluster health check that walks them."""
