"""What a run did, read back after it: ML Metadata (`run_record.py`), the run summary made
of typed parts (`parts/`, one per room that produces the facts; `summary_part.py` says
what a part is, `run_summary.py` puts them together, `summary_reading.py` reads them from
a finished run), how the run ended in words, the webhook message, and the Tuner's trials."""
