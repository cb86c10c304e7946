"""What a run did, read back after it: ML Metadata (`run_record.py`), the run summary built
from typed parts (`run_summary.py`, `parts/`), how the run ended in words and the webhook
message, and the Tuner's trials."""
