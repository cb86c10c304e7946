"""Which hardware trains and how: TPU/GPU/CPU strategy, per-device policy, several machines."""
