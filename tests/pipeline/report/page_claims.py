"""Reads a report page back as sentences and checks each one against the run's facts.

Every paragraph and list item of the page is a claim. `CLAIMS` lists each kind
of sentence the template can write, with the facts under which it is true; a
sentence of the page that no claim recognises fails the check too, so a new
sentence in the template needs its condition written here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable
from html.parser import HTMLParser

from tpu_pipeline.pipeline.report.collect import RunReport

TOP = "top"  # the run line and the outcome, above the first section


@dataclasses.dataclass
class Page:
    sentences: dict[str, list[str]]  # section id -> paragraph and list-item texts
    rows: dict[str, list[list[str]]]  # section id -> table rows' cell texts


class _PageReader(HTMLParser):
    def __init__(self):
        super().__init__()
        self.page = Page({TOP: []}, {TOP: []})
        self._section = TOP
        self._text: list[str] | None = None
        self._row: list[str] | None = None
        self._cell: list[str] | None = None
        self._in_title = False

    def handle_starttag(self, tag, attrs):
        if tag == "h2":
            self._section = dict(attrs)["id"]
            self.page.sentences[self._section] = []
            self.page.rows[self._section] = []
        elif tag in ("p", "li"):
            self._text = []
        elif tag == "tr":
            self._row = []
        elif tag in ("td", "th"):
            self._cell = []
        elif tag == "title":
            self._in_title = True

    def handle_endtag(self, tag):
        if tag in ("p", "li") and self._text is not None:
            text = " ".join("".join(self._text).split())
            if text:
                self.page.sentences[self._section].append(text)
            self._text = None
        elif tag in ("td", "th") and self._cell is not None:
            self._row.append(" ".join("".join(self._cell).split()))
            self._cell = None
        elif tag == "tr" and self._row is not None:
            self.page.rows[self._section].append(self._row)
            self._row = None
        elif tag == "title":
            self._in_title = False

    def handle_data(self, data):
        for parts in (self._text, self._cell):
            if parts is not None:
                parts.append(data)


def read_page(html: str) -> Page:
    reader = _PageReader()
    reader.feed(html)
    return reader.page


def _status(report: RunReport, node_id: str) -> str:
    return next((c.status for c in report.summary.components if c.id == node_id), "skipped")


def _trained(report: RunReport) -> bool:
    return _status(report, "Trainer") in ("executed", "cached")


def _temperature_is(report: RunReport, m: re.Match) -> bool:
    recorded = (report.summary.trainer or {}).get("temperature_scaling")
    return bool(recorded) and (
        m.group(1) == f"{recorded['temperature']:.3f}"
        and int(m.group(2).replace(",", "")) == recorded["examples"]
        and m.group(3) == f"{recorded['calibration_error_before']:.4f}"
        and m.group(4) == f"{recorded['calibration_error_after']:.4f}"
        and (m.group(5) == "served") == recorded["applied"]
        and recorded["applied"]
        == (recorded["calibration_error_after"] < recorded["calibration_error_before"])
    )


def _slice_rule_is(report: RunReport, margin: str, min_examples: str) -> bool:
    return (
        report.summary.slice_margin is not None
        and margin == f"{report.summary.slice_margin:.2f}"
        and int(min_examples) == report.summary.slice_min_examples
    )


def _weak_slices(report: RunReport) -> list:
    """The slices the rule flags, worked out here from the accuracies, not the flags."""
    overall = report.summary.metrics["accuracy"]
    return [
        s
        for s in report.summary.slices
        if s.examples >= report.summary.slice_min_examples
        and overall - s.accuracy > report.summary.slice_margin
    ]


def _attributions_shown_are_true(report: RunReport, match: re.Match) -> bool:
    """The caption's method, model and counts (groups `method`, `served`, `phrase`,
    `examined`, `right`) and time (`seconds`) are the stored ones."""
    a = report.attributions
    if a is None or not a.chosen:
        return False
    mistakes = sum(c.mistake for c in a.chosen)
    if mistakes == 0:
        phrase = "none of its answers was a mistake"
    elif mistakes < a.settings["mistakes"]:  # fewer than asked for: there are no more
        phrase = f"all {mistakes} of its mistakes"
    else:
        phrase = f"its {mistakes} most confident mistakes"
    served = bool(report.deployment and report.deployment.served)
    return (
        match["method"].lower() == a.method_name.lower()
        and bool(match["served"]) == served
        and match["phrase"] == phrase
        and int(match["examined"]) == a.settings["examined_examples"]
        and int(match["right"]) == len(a.chosen) - mistakes
        and match["seconds"] == f"{a.settings['seconds']:.1f}"
    )


def _attributions_caption_is_true(report: RunReport, match: re.Match) -> bool:
    """Integrated gradients or XRAI: the shown answers, and the steps and baselines."""
    a = report.attributions
    return (
        _attributions_shown_are_true(report, match)
        and a.method != "grad_cam"
        and int(match["steps"]) == a.settings["steps"]
        and match["baselines"].split(" and a ") == a.settings["baselines"]
    )


def _grad_cam_caption_is_true(report: RunReport, match: re.Match) -> bool:
    """Grad-CAM: the shown answers, and the layer the model kept."""
    a = report.attributions
    return (
        _attributions_shown_are_true(report, match)
        and a.method == "grad_cam"
        and match["layer"] == a.settings["layer"]
    )


def _class_weight(report: RunReport) -> str | None:
    return ((report.config or {}).get("trainer") or {}).get("class_weight")


def _previous_run_is(report: RunReport, m: re.Match) -> bool:
    """The run-history sentence names the run before, its outcome and accuracy, and links
    its report exactly when that report was kept."""
    history = report.history
    if history is None or history.previous is None:
        return False
    previous = history.previous
    accuracy = None if previous.accuracy is None else f"{previous.accuracy:.4f}"
    return (
        m["id"] == previous.run_id
        and m["outcome"] == previous.outcome
        and m["accuracy"] == accuracy
        and (m["kept"] == "its report.") == (history.previous_report is not None)
        and m["folder"] == report.run_dir
    )


Fact = Callable[[RunReport, re.Match], bool]


@dataclasses.dataclass(frozen=True)
class Claim:
    section: str
    pattern: str  # matched at the start of a sentence (re.match)
    true_when: Fact


def _claims() -> list[Claim]:
    def pushed(r, m):
        return r.summary.pushed_model is not None

    def not_pushed(r, m):
        return r.summary.pushed_model is None

    def anomalies(r):
        return r.data.anomalies if r.data else None

    return [
        # top
        Claim(TOP, r"Run \(never reached ML Metadata\) in ", lambda r, m: r.run_id is None),
        Claim(TOP, r"Run (\S+) in ", lambda r, m: m.group(1) == r.run_id),
        Claim(
            TOP,
            r"Interrupted by (.+): the run stopped and nothing was pushed; the same command",
            lambda r, m: r.summary.interrupted == m.group(1) and not_pushed(r, m),
        ),
        Claim(
            TOP,
            r"Data rejected.*, so nothing was trained or pushed: ",
            lambda r, m: r.summary.data_rejected and not _trained(r) and not_pushed(r, m),
        ),
        Claim(
            TOP,
            r"The run failed(?: in (\S+))? and nothing was pushed: (.*)",
            lambda r, m: (
                not r.summary.interrupted
                and not r.summary.data_rejected
                and m.group(2) == r.summary.error
                and not_pushed(r, m)
                and (m.group(1) is None or _status(r, m.group(1)) == "failed")
            ),
        ),
        Claim(
            TOP,
            r"Trained but not blessed \((.*)\); nothing was pushed\.$",
            lambda r, m: (
                _trained(r)
                and not r.summary.blessed
                and m.group(1) == r.summary.blessing_reason
                and not_pushed(r, m)
            ),
        ),
        Claim(
            TOP,
            r"Blessed \((.*)\) but not pushed: ",
            lambda r, m: r.summary.blessed and not_pushed(r, m),
        ),
        Claim(
            TOP,
            r"Blessed \((.*)\) and served from (\S+) ",
            lambda r, m: r.summary.blessed and m.group(2) == r.summary.pushed_model,
        ),
        # the first screen: the thresholds, the verdict and what serves now
        Claim(
            TOP,
            r"Thresholds: (.*)\.$",
            lambda r, m: (
                r.evaluation is not None
                and m.group(1)
                == "; ".join(f"{t.metric}: {t.rule}" for t in r.evaluation.thresholds)
            ),
        ),
        Claim(
            TOP,
            r"Verdict: (blessed|not blessed): (.*)\.$",
            lambda r, m: (
                (m.group(1) == "blessed") == bool(r.summary.blessed)
                and m.group(2) == r.summary.blessing_reason
            ),
        ),
        Claim(
            TOP,
            r"Served now: nothing; no version in the run folder's serving_model\.$",
            lambda r, m: r.serving_now is None,
        ),
        Claim(
            TOP,
            r"Served now: version (\d+); this run pushed nothing\.$",
            lambda r, m: m.group(1) == r.serving_now and not_pushed(r, m),
        ),
        Claim(  # this run's push serves, or was set aside since (group 2 names it)
            TOP,
            r"Served now: version (\d+)(?:, pushed by this run\.$|; the version this run "
            r"pushed \((\d+)\) was set aside since\.$)",
            lambda r, m: (
                m.group(1) == r.serving_now
                and pushed(r, m)
                and r.summary.pushed_model.endswith(f"/{m.group(2) or m.group(1)}")
                and m.group(2) != m.group(1)
            ),
        ),
        # run history
        Claim(
            "history",
            r"The run before: (?P<id>\S+) \([\d-]+ [\d:]+\), (?P<outcome>.+?)(?:, accuracy "
            r"(?P<accuracy>\d\.\d{4}))?: (?P<kept>its report\.|its report was not kept \(only "
            r"reports written since they are kept per run are\)\.) tpu-pipeline runs "
            r"(?P<folder>\S+) lists every run; tpu-pipeline runs (?P=folder) diff compares the "
            r"last two\.$",
            _previous_run_is,
        ),
        Claim(
            "history",
            r"The first run of this folder\.$",
            lambda r, m: r.history is not None and r.history.previous is None,
        ),
        Claim(
            "history",
            r"No run history: the folder has no ML Metadata store\.$",
            lambda r, m: r.history is None,
        ),
        # what ran
        Claim("what-ran", r"No component ran\.$", lambda r, m: not r.summary.components),
        Claim("what-ran", r"Error: (.*)", lambda r, m: m.group(1) == r.summary.error),
        Claim("what-ran", r"Full logs: (\S+)$", lambda r, m: m.group(1) == r.summary.log_file),
        Claim(
            "what-ran",
            r"Peak memory of the run: (.*?)\. Peak memory is the pipeline process's resident",
            lambda r, m: (
                m.group(1)
                == r.summary.describe_memory(
                    f" in {r.summary.peak_rss_component}" if r.summary.peak_rss_component else ""
                )
            ),
        ),
        # data
        Claim("data", r"The run stopped before StatisticsGen\.$", lambda r, m: r.data is None),
        Claim(
            "data",
            r"The classes are unbalanced: .*(Consider|This run weighted the classes)",
            lambda r, m: (
                r.data.unbalanced and (m.group(1) == "Consider") != (_class_weight(r) == "balanced")
            ),
        ),
        Claim(
            "data",
            r"Photos are stored encoded",
            lambda r, m: r.data.describes_photos,
        ),
        Claim(
            "data",
            r"ExampleValidator did not run: the data was not checked",
            lambda r, m: anomalies(r) is None,
        ),
        Claim(
            "data",
            r"No schema anomalies; the data was rejected for the reason above\.$",
            lambda r, m: anomalies(r) == [] and r.summary.data_rejected,
        ),
        Claim(
            "data",
            r"None, as there could be none: this run inferred the schema from these same "
            r"examples and wrote it to (\S+),",
            lambda r, m: anomalies(r) == [] and m.group(1) == r.summary.schema_bootstrapped,
        ),
        Claim(
            "data",
            r"None: the data matched the schema (\S+)\.$",
            lambda r, m: (
                anomalies(r) == []
                and not r.summary.data_rejected
                and r.summary.schema_bootstrapped is None
                and m.group(1) == r.data.schema_file
            ),
        ),
        Claim(
            "data",
            r"(span shift: .*)\.$",
            lambda r, m: (
                bool(r.summary.span_shift) and m.group(1) == r.summary.span_shift["headline"]
            ),
        ),
        Claim("data", r"(.+)", lambda r, m: m.group(1) in (anomalies(r) or [])),  # the list
        # tuning
        Claim(
            "tuning",
            r"\d+ trial\(s\) scored by .* the Trainer (trained|was to train) with the values",
            lambda r, m: r.summary.tuning is not None and (m.group(1) == "trained") == _trained(r),
        ),
        # training
        Claim(
            "training",
            r"No epoch finished\.$",
            lambda r, m: r.training is not None and not r.training.scalars.get("train"),
        ),
        Claim(
            "training",
            r"The Trainer (failed|was interrupted) \(see the error above\)",
            lambda r, m: (
                r.training is None and _status(r, "Trainer") == m.group(1).removeprefix("was ")
            ),
        ),
        Claim(
            "training",
            r"The Trainer did not run\.$",
            lambda r, m: r.training is None and _status(r, "Trainer") == "skipped",
        ),
        Claim(
            "training",
            r"tensorboard --logdir (\S+)",
            lambda r, m: r.training is not None and m.group(1) == r.training.log_dir,
        ),
        # evaluation
        Claim("evaluation", r"Thresholds:$", lambda r, m: r.evaluation is not None),
        Claim(
            "evaluation",
            r"(\S+): (.+)",
            lambda r, m: (
                r.evaluation is not None
                and (m.group(1), m.group(2))
                in [(t.metric, t.rule) for t in r.evaluation.thresholds]
            ),
        ),
        Claim(
            "evaluation",
            r"Blessing: blessed: (.*)\.$",
            lambda r, m: r.summary.blessed and m.group(1) == r.summary.blessing_reason,
        ),
        Claim(
            "evaluation",
            r"Blessing: not blessed: (.*)\.$",
            lambda r, m: not r.summary.blessed and m.group(1) == r.summary.blessing_reason,
        ),
        Claim(
            "evaluation",
            r"Against the last blessed model on the same eval examples \(evaluator\.baseline_test, "
            r"evaluator\.baseline_confidence, evaluator\.max_accuracy_drop\): (.*)\.$",
            lambda r, m: (
                r.summary.baseline_comparison is not None
                and m.group(1) == r.summary.baseline_comparison.describe()
            ),
        ),
        Claim(
            "evaluation",
            r"The Evaluator (failed|was interrupted) \(see the error above\)",
            lambda r, m: (
                r.evaluation is None and _status(r, "Evaluator") == m.group(1).removeprefix("was ")
            ),
        ),
        Claim(
            "evaluation",
            r"Expected calibration error (\d\.\d{4}) on (\d+) eval examples: the mean gap "
            r"between the top probability the model gave and how often that top class was "
            r"right, in buckets of that probability \(0 is perfect\)\.$",
            lambda r, m: (
                r.summary.calibration is not None
                and m.group(1) == f"{r.summary.calibration.expected_calibration_error:.4f}"
                and int(m.group(2)) == r.summary.calibration.examples
            ),
        ),
        Claim(
            "evaluation",
            r"slices: none more than (\d\.\d\d) below the overall accuracy with at least (\d+) "
            r"examples \((\d+) slices of ([a-z_, ]+)\)\.$",
            lambda r, m: (
                _slice_rule_is(r, m.group(1), m.group(2))
                and not _weak_slices(r)
                and int(m.group(3)) == len(r.summary.slices)
                and m.group(4).split(", ") == list(dict.fromkeys(s.kind for s in r.summary.slices))
            ),
        ),
        Claim(
            "evaluation",
            r"weak slices \(more than (\d\.\d\d) below the overall accuracy with at least (\d+) "
            r"examples\): (.+)\.$",
            lambda r, m: (
                _slice_rule_is(r, m.group(1), m.group(2))
                and m.group(3).split("; ")
                == [
                    f"{s.kind}={s.value} {s.accuracy:.4f} ({s.examples:,} examples)"
                    for s in _weak_slices(r)
                ]
            ),
        ),
        Claim(
            "evaluation",
            r"A slice is flagged when its accuracy is more than (\d\.\d\d) below the overall "
            r"accuracy and it holds at least (\d+) eval examples \(evaluator\.slice_margin, "
            r"evaluator\.slice_min_examples\); evaluator\.slice_accuracy_lower_bounds makes a "
            r"slice kind's bound a condition of the blessing for each of its slices holding at "
            r"least (\d+) eval examples; a smaller slice is shown, not judged\.$",
            lambda r, m: _slice_rule_is(r, m.group(1), m.group(2)) and m.group(3) == m.group(2),
        ),
        Claim(
            "evaluation",
            r"temperature scaling: T=(\d+\.\d{3}) fitted on ([\d,]+) eval examples, expected "
            r"calibration error (\d\.\d{4}) -> (\d\.\d{4}) \((served|not applied: it would not "
            r"lower the error)\) \(serving\.temperature_scaling; the reliability diagram is the "
            r"served model's\)\.$",
            lambda r, m: _temperature_is(r, m),
        ),
        Claim(
            "evaluation",
            r"The Evaluator did not run\.$",
            lambda r, m: not r.summary.metrics and _status(r, "Evaluator") == "skipped",
        ),
        # deployment
        Claim(
            "deployment",
            r"Pushed: nothing \((.*)\)\.$",
            lambda r, m: not_pushed(r, m) and m.group(1) == r.summary.push_note,
        ),
        Claim(
            "deployment",
            r"Pushed: (\S+) \((.*)\)\.$",
            lambda r, m: m.group(1) == r.summary.pushed_model and m.group(2) == r.summary.push_note,
        ),
        Claim(
            "deployment",
            r"Model (\d+) in ML Metadata: (\S+) \(tpu-pipeline serving bless takes the id or",
            lambda r, m: (
                int(m.group(1)) == r.deployment.model_id
                and m.group(2) == r.deployment.model_uri
                # the page shows the Trainer's export itself when nothing was pushed
                and (r.deployment.served or r.deployment.model_dir.startswith(m.group(2)))
            ),
        ),
        Claim(
            "deployment",
            r"Model card of the pushed version: (\S+), and the same card as a page beside it",
            lambda r, m: pushed(r, m) and m.group(1) == r.summary.model_card,
        ),
        Claim(
            "deployment",
            r"Serving signatures of the served model (\S+) ",
            lambda r, m: (
                pushed(r, m) and r.deployment.served and m.group(1) == r.deployment.model_dir
            ),
        ),
        Claim(
            "deployment",
            r"Serving signatures of the candidate the Trainer exported, (\S+); nothing serves it",
            lambda r, m: not_pushed(r, m) and m.group(1) == r.deployment.model_dir,
        ),
        Claim(
            "deployment",
            r"The SavedModel and its TFLite variants .*of the SavedModel's accuracy\.$",
            lambda r, m: bool(r.summary.serving_variants) and pushed(r, m),
        ),
        Claim(
            "deployment",
            r"The SavedModel and its TFLite variants .* "
            r"Nothing was pushed, so none is published\.$",
            lambda r, m: bool(r.summary.serving_variants) and not_pushed(r, m),
        ),
        # attributions
        Claim(
            "attributions",
            r"(?P<method>Integrated gradients|XRAI) maps of what drove the top class of the "
            r"model the Evaluator judged(?P<served> \(the served model\))?, computed on its "
            r"pixels signature: (?P<phrase>.+) among the first (?P<examined>\d+) eval examples, "
            r"then its most confident right answer per class \((?P<right>\d+) in all\); "
            r"(?P<steps>\d+) integration steps from a (?P<baselines>.+) baseline, "
            r"(?P<seconds>[\d.]+) s in the Explainer \(explain: in the configuration\)\.$",
            _attributions_caption_is_true,
        ),
        Claim(
            "attributions",
            r"(?P<method>Grad-CAM) maps of what drove the top class of the model the Evaluator "
            r"judged(?P<served> \(the served model\))?, computed from the feature maps of its "
            r"layer (?P<layer>\S+) and their gradients, kept with the model beside its pixels "
            r"signature: (?P<phrase>.+) among the first (?P<examined>\d+) eval examples, then "
            r"its most confident right answer per class \((?P<right>\d+) in all\); one model "
            r"call an image, (?P<seconds>[\d.]+) s in the Explainer \(explain: in the "
            r"configuration\)\.$",
            _grad_cam_caption_is_true,
        ),
        Claim(
            "attributions",
            r"The Explainer found no answer to explain among the first (\d+) "
            r"eval examples\.$",
            lambda r, m: (
                r.attributions is not None
                and not r.attributions.chosen
                and int(m.group(1)) == r.attributions.settings["examined_examples"]
            ),
        ),
        Claim(
            "attributions",
            r"No attributions: the explain section asks for none, or the Explainer did not "
            r"finish\.$",
            lambda r, m: r.attributions is None and r.training is not None,
        ),
        Claim("attributions", r"The Trainer did not run\.$", lambda r, m: r.training is None),
        Claim(
            "attributions",
            r"The Trainer (failed|was interrupted) \(see the error above\): ML Metadata holds no "
            r"model of it\.$",
            lambda r, m: r.training is None,
        ),
        # samples
        Claim(
            "samples",
            r"(\d+) mistakes among the first (\d+) eval examples, predicted by the served model;",
            lambda r, m: (
                pushed(r, m)
                and (int(m.group(1)), int(m.group(2))) == (r.samples.mistakes, r.samples.examined)
            ),
        ),
        Claim(
            "samples",
            r"(\d+) mistakes among the first (\d+) eval examples, predicted by the candidate the "
            r"Trainer exported, which is not served;",
            lambda r, m: (
                not_pushed(r, m)
                and (int(m.group(1)), int(m.group(2))) == (r.samples.mistakes, r.samples.examined)
            ),
        ),
        Claim("samples", r"No trained model to predict with\.$", lambda r, m: r.samples is None),
    ]


CLAIMS = _claims()
SECTIONS = [
    TOP,
    "history",
    "data",
    "training",
    "evaluation",
    "attributions",
    "deployment",
    "samples",
    "what-ran",
]


def false_sentences(page: Page, report: RunReport, section: str) -> list[str]:
    """The section's sentences no claim makes true for this run, each with why."""
    wrong = []
    for sentence in page.sentences.get(section, []):
        matches = [
            (claim, match)
            for claim in CLAIMS
            if claim.section == section and (match := re.match(claim.pattern, sentence))
        ]
        if not matches:
            wrong.append(f"no claim recognises: {sentence!r}")
        elif not any(claim.true_when(report, match) for claim, match in matches):
            wrong.append(f"not true of this run: {sentence!r}")
    return wrong


def published_cells(page: Page) -> list[str]:
    """The `published` column of the deployment section's variants table."""
    rows = page.rows.get("deployment", [])
    header = next((row for row in rows if "published" in row), None)
    if header is None:
        return []
    column = header.index("published")
    return [row[column] for row in rows[rows.index(header) + 1 :] if len(row) > column]
