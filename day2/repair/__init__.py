"""`gpu-pool repair`: a faulted card's VM power-cycled through Proxmox, one failure domain at a time."""
