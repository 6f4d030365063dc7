"""Acceptance tiers (`gpunode accept`): scripts/accept_node.py runs a tier on each node under a time budget; this
package ships it, reads its JSON and turns the tools' outputs into findings with gpunode's readers."""
