"""A model card for every pushed version: the facts the run recorded (`facts`), in the Model
Card Toolkit's schema (`card`), written as JSON and HTML into the version (`write`)."""
