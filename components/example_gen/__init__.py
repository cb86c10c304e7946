"""Raw data in every common image format -> validated `tf.train.Example`s through ExampleGen.

One custom ExampleGen executor per source format (executor.py) reads the files
with the readers in formats.py and normalises every record to the layout the
rest of the pipeline reads: a flat float pixel feature and an int64 label, as
named in `DatasetConfig`. Bad input raises `DataFormatError` naming the file and
record. `factory.build_example_gen` picks the component for a dataset.
"""
