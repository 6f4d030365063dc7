#!/bin/sh
# Runs before every real DKMS build of this module (dkms.conf PRE_BUILD): the tests count builds per host with it.
date +%s >> /var/log/gpunode-hello-builds
