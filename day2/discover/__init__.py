"""`gpu-pool discover`: the NVIDIA cards of the stack's Proxmox nodes, as stack-file entries."""
