"""Generated protobuf code for the kubelet's PodResources API (`make protos`; do not edit the *_pb2 files)."""
