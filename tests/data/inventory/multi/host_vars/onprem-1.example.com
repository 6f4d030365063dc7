# host_vars file without an extension
rack: r12
