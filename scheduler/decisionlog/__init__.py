"""The decision log: JSON lines of what a scheduler decided and what happened next (schema
`kubejoule.decision/v1`), its files and their reader. May import domain/ and framework/."""
