"""Exit codes of every command: 0 ok, 1 some host failed or is unhealthy, 2 usage or input error."""

EXIT_OK, EXIT_FAILED, EXIT_USAGE = 0, 1, 2
