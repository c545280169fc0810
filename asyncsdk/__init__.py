"""Async SDK."""
