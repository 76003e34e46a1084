"""Executors: one module per kind of job."""
