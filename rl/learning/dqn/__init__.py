"""The DQN placement policy: a Q-network shared by every candidate node's row (`network`),
n-step replay with demonstrations (`replay`), episodes drawn from random clusters and traces
(`episodes`), and the training loop (`train`). torch is imported only here, never by the
scheduler, which serves the exported weights with numpy (`scheduler.learning.numpy_model`)."""
