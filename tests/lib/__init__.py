"""Shared helpers for fluxfs's Python test suites (integration, fidelity, benchmarks)."""
