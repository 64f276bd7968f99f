"""ABISS (§4): category-aware generation and the ten-stage validation cascade, as plain Python."""
