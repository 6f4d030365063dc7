"""Health checks on Evidence, one module per subject; analyze() runs them all."""
