"""`gpu-pool`: the day-2 tool. Who holds which card (claims) and which floor of the GPU stack is broken (doctor)."""
