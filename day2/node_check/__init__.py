"""`gpu-pool node-check`: a GPU worker's own floors from the PCI bus up. Standard library only (and knowledge/):
it runs on the node as a zip (`python3 -m day2.node_check` from a copy)."""
