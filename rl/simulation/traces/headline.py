"""The headline's rows: the scenario (`heterogeneous-autoscaler`) and the policies it compares,
the baseline (`default@least-waste`) first; its tables and targets are rl/evaluation/report.py's."""

HEADLINE_SCENARIO = "heterogeneous-autoscaler"
BASELINE = "default@least-waste"
BEFORE_7631 = "default@random"
KUBEJOULE = "kubejoule@kubejoule"
EXTENDER = "default+extender:5@kubejoule"
PACKING = "mostallocated@least-waste"
# Bin packing with our expander: what the recommended setup must never be worse than (issue 33).
PACKING_REFERENCE = "mostallocated@kubejoule"
# The setup docs/results.md recommends (not worse than PACKING_REFERENCE on any axis): the
# energy plugin's efficiency lever alone (rl/scenarios/kubejoule-efficiency.yaml) with our expander.
RECOMMENDED = "profile:kubejoule-efficiency.yaml@kubejoule"
REBALANCED = "kubejoule+rebalancer@kubejoule"
OPERATORS_PACKING = "mostallocated+highnodeutilization@least-waste"
HEADLINE_POLICIES = (
    BASELINE,
    BEFORE_7631,
    "default@kubejoule",
    "kubejoule@least-waste",
    KUBEJOULE,
    RECOMMENDED,
    "default+extender:1@kubejoule",
    EXTENDER,
    "default+extender:12@kubejoule",
    "heuristic@kubejoule",
    PACKING,
    "mostallocated@kubejoule",
    "peaks@kubejoule",
    "trimaran@kubejoule",
    OPERATORS_PACKING,
    REBALANCED,
)
