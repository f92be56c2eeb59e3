"""What both components use: explicit providers, Kubernetes object registration, the GPU node marking."""
