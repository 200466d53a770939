"""containerd's event service over gRPC (our own .proto subset; stubs generated into `gen/`)."""
