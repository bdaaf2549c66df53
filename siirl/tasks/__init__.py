"""Embedded tasks and models: synthetic addition data and a tiny SFT-warmed Qwen2; digit images and a tiny
SFT-warmed Qwen2-VL.

The default run needs no download: the models, tokenizers and parquet files ship inside the package
under ``siirl/assets`` (``siirl.embedded_assets`` finds them) and are rebuilt by
``python -m siirl.tasks.build_tiny_model`` and ``python -m siirl.tasks.build_tiny_vlm``.
"""
