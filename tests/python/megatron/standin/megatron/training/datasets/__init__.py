"""Stand-in megatron.training.datasets."""
