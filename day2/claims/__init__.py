"""`gpu-pool claims`: who holds which card, who waits, and which holders stayed idle."""
