"""The `nfs_mount` step and what it is made of: vendor option presets, fstab lines, probe state, preflight,
Kubernetes volumes, verify-time checks."""
