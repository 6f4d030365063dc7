"""The package share: the package files an apt install fetches, downloaded by one host of a run and handed to the
others over their SSH connections, so N hosts pull them from the mirror once. store: the controller's folder (by
sha256); coord: which host of a run fetches each file and who waits for it; remote: the host-side commands. Apt still
installs them: a file is placed in apt's archive cache only after its sha256 matched the host's own package index,
which `apt-get update` verified against the repository's signed Release. What a step does with it is
gpunode/steps/package_share.py: this package is below the steps and never imports them."""
