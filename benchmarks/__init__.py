"""kubejoule's benchmarks (`make bench`) and the harness they share with the tests."""
