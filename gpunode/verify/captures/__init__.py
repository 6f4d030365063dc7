"""Reading capture files: split any paste into blocks, recognise each, read it into Evidence."""
