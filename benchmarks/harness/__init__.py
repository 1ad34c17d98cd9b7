"""What the benchmarks and the tests both run against: processes, emulated clusters, stand-ins
(NVML, Redfish, the kubelet's PodResources), request bodies. Imports the product, never `tests`."""
