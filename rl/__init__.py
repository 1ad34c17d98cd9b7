"""kubejoule rl package."""
