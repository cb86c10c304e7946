"""What the Evaluator is configured with (`eval_config`) and the one reader of what it wrote
(`results`), for the Pusher's model card, the run summary and the report."""
