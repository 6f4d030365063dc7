"""Training pods and Jobs for serverless GPU clouds (Alibaba ECI, Tencent EKS super nodes), with the clouds' own
annotations and limits (facts.py, each with its page) and refusals of what their guides forbid (manifest.py)."""
