"""Generated protobuf code for the gRPC expander and the externalgrpc cloud provider
(`make protos`; do not edit the *_pb2 files)."""
