"""What learned scorers see and serve: feature schemas v1 (`features`), v2 and v3 (`features_v2`,
`features_v3`, sharing `features_v2.WorkloadSchema`), a model file's numpy forward pass and the
`learned` Score plugin (no torch). May import domain/, framework/, lifetimes/, plugins/ (the
energy plugin, whose ΔP and curves the features read); plugins/ never imports learning/."""
