"""The drift message names the class whose share moved most, not only its label value."""

from tpu_pipeline.components.data_checks.label_drift import name_the_class

TFDV_DESCRIPTION = (
    "The Linfty distance between current and previous is 0.15 (up to six significant "
    "digits), above the threshold 0.1. The feature value with maximum difference is: 3"
)


def test_the_most_moved_label_value_is_followed_by_its_class_name():
    names = ("zero", "one", "two", "three")

    assert name_the_class(TFDV_DESCRIPTION, names).endswith("maximum difference is: 3 ('three')")


def test_labels_without_names_or_out_of_range_keep_tfdv_words():
    assert name_the_class(TFDV_DESCRIPTION, ()) == TFDV_DESCRIPTION
    assert name_the_class(TFDV_DESCRIPTION, ("zero", "one")) == TFDV_DESCRIPTION
