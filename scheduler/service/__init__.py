"""What every long-running scheduler process shares (standalone, extender, expander, rebalancer):
leader election, the /metrics endpoint, background work. May import cluster/ and domain/."""
