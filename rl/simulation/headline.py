"""The headline's rows: the scenario (`heterogeneous-autoscaler`) and the policies it compares,
the baseline (`default@least-waste`) first; its tables and targets are rl/evaluation/report.py's."""

HEADLINE_SCENARIO = "heterogeneous-autoscaler"
BASELINE = "default@least-waste"
BEFORE_7631 = "default@random"
KUBEJOULE = "kubejoule@kubejoule"
EXTENDER = "default+extender:5@kubejoule"
PACKING = "mostallocated@least-waste"
REBALANCED = "kubejoule+rebalancer@kubejoule"
OPERATORS_PACKING = "mostallocated+highnodeutilization@least-waste"
HEADLINE_POLICIES = (
    BASELINE,
    BEFORE_7631,
    "default@kubejoule",
    "kubejoule@least-waste",
    KUBEJOULE,
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
