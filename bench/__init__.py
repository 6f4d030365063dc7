"""Benchmarks: gpunode against ansible-core and pyinfra on lab hosts, and parse/facts timings."""
