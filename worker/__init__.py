"""Fanyi worker: loads artifacts and translates with ONNX Runtime. Never imports torch."""
