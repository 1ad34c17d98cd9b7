"""Generated protobuf code for the gRPC expander (`make protos`; do not edit the *_pb2 files)."""
