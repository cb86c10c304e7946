"""What is published for clients: the SavedModel's signatures, TFLite variants, the push itself.

To add a serving format, this is the one folder to open (README "Architecture").
"""
