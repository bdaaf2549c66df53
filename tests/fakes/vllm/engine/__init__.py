"""``vllm.engine``: engine configuration."""
