"""The `gpunode` tasks by group (gpunode/tasks.py assembles them into the collection `ns`)."""
