"""Documents: segmentation, windows (plan, stitch), degeneration checks."""
