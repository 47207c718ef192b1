"""Shared per-file facts: what names refer to, tensor-ness of values, and the hot path."""
