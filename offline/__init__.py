"""Running the real Pulumi program without an engine: the offline preview and the tests share this code path."""
