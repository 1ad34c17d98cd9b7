"""What learned scorers see and serve: feature schemas v1-v3, a model file's numpy forward pass and the
`learned` Score plugin (no torch). May import domain/, framework/, lifetimes/, plugins/ (the energy plugin)."""
