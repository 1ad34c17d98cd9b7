"""kubejoule scheduler package."""
