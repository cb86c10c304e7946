"""Which answers are explained: confident mistakes first, then the surest right answer per class."""

import numpy as np

from tpu_pipeline.components.explain.choice import Chosen, choose_answers


def _answers(rows):
    """(probabilities, labels) from rows of (label, probabilities)."""
    return np.array([p for _, p in rows], np.float32), np.array([y for y, _ in rows])


def test_mistakes_come_first_surest_first_then_the_surest_right_answer_of_each_class():
    probabilities, labels = _answers(
        [
            (0, [0.9, 0.1, 0.0]),  # right, class 0
            (1, [0.7, 0.3, 0.0]),  # wrong, 0.7
            (2, [0.05, 0.95, 0.0]),  # wrong, 0.95
            (0, [0.99, 0.01, 0.0]),  # right, class 0, surer
            (1, [0.2, 0.8, 0.0]),  # right, class 1
            (2, [0.6, 0.0, 0.4]),  # wrong, 0.6
        ]
    )

    chosen = choose_answers(probabilities, labels, mistakes=2, correct_per_class=1)

    assert [c.index for c in chosen] == [2, 1, 3, 4]  # class 2 has no right answer
    assert [c.mistake for c in chosen] == [True, True, False, False]
    assert chosen[0] == Chosen(index=2, label=2, predicted=1, probability=np.float32(0.95))
    assert chosen[2].probability == np.float32(0.99)


def test_every_mistake_and_several_right_answers_per_class_when_asked():
    probabilities, labels = _answers(
        [(0, [0.6, 0.4]), (0, [0.8, 0.2]), (0, [0.7, 0.3]), (1, [0.9, 0.1])]
    )
    chosen = choose_answers(probabilities, labels, mistakes=5, correct_per_class=2)
    assert [c.index for c in chosen] == [3, 1, 2]
    assert choose_answers(probabilities, labels, mistakes=0, correct_per_class=0) == []


def test_equal_confidence_keeps_the_examples_order():
    probabilities, labels = _answers([(1, [0.5, 0.5]), (1, [0.5, 0.5]), (1, [0.5, 0.5])])
    chosen = choose_answers(probabilities, labels, mistakes=2, correct_per_class=0)
    assert [c.index for c in chosen] == [0, 1]  # argmax of a tie is class 0: all wrong


def test_json_says_whether_it_is_a_mistake_and_an_unlabelled_answer_is_none():
    assert Chosen(0, 1, 2, 0.5).as_json()["mistake"] is True
    unlabelled = Chosen(0, None, 2, 0.5, source="a.png:0")
    assert not unlabelled.mistake and unlabelled.as_json()["source"] == "a.png:0"
