"""Mininet topologies and experiment runners for FlexPass on BMv2 (issue #5)."""
