"""``vllm.lora``: adapter requests."""
