"""A stand-in for Megatron-LM with its import paths and function names (written for the tests; no Megatron code)."""
