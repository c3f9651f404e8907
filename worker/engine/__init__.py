"""Inference engine: ONNX Runtime sessions, KV-cached decoding steps, greedy and beam search."""
