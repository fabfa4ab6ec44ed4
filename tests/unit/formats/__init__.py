"""Trajectory formats: every one into the one model."""
