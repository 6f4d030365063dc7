"""Image baking: Packer templates driven through the packer CLI, gpunode provisioning the build instance,
cleanup and validation before capture, tags, and baking an already provisioned instance."""
