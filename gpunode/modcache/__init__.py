"""The module cache: a DKMS module built once per (kernel, module, version, flavour, arch) group, kept as a binary
package on the controller (or a folder the user names) and installed on the other hosts of the group without a
compiler run. key: the group; store: the folder and its manifests; remote: the host-side scripts; coord: which host
of a run builds and which wait. What a step plans and applies with it is gpunode/steps/module_cache.py: this package
is below the steps and never imports them."""
