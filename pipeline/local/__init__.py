"""Running the pipeline on this machine: LocalDagRunner with a status line per component,
the peak memory each needed, kept in the run folder as it finishes."""
