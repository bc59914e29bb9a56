"""Stand-in megatron.core."""
