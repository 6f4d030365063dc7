// A minimal kernel module for the module cache tests: real DKMS builds it, gpunode caches and installs it.
#include <linux/init.h>
#include <linux/module.h>

MODULE_LICENSE("GPL");
MODULE_DESCRIPTION("gpunode module cache test module");
MODULE_VERSION("1.0");

static int __init gpunode_hello_init(void) { pr_info("gpunode_hello: loaded\n"); return 0; }
static void __exit gpunode_hello_exit(void) { pr_info("gpunode_hello: unloaded\n"); }

module_init(gpunode_hello_init);
module_exit(gpunode_hello_exit);
