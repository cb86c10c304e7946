"""Looks at data outside a run: a quick survey of an image folder, and a schema bootstrapped
with TFDV for a person to curate."""
