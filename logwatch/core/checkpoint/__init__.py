"""A model directory as vLLM will read it, judged before a weight is loaded: the safetensors
headers and index (files.py), the tensor shapes the architecture expects from config.json
(families.py), the shapes a quantized layer's packed tensors stand for (layouts.py), and the
failures they predict (checks.py)."""
