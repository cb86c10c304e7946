"""Rollback, pin, restore, unpin and bless on a run folder: the protocol's local backend.

Each action changes two stores: the serving folder (what a model server serves,
`serving_ops/local/folder.py`) and the blessings in ML Metadata (what the next run
takes as its baseline, `serving_ops/local/baseline.py` and `serving_ops/local/blessing.py`).
No transaction covers both, so every action keeps the order of `serving_ops/protocol.py`,
whoever calls it (the command line calls only these), with this store's means:

1. the run lock (`common/run_lock.py`), waited for at most `wait_seconds`,
   saying whom it waits for: a run (whose baseline and Pusher the change would
   race) or another serving action;
2. settle: an action a dead process left half-done is finished or undone first,
   saying whose it was (`serving_ops/local/intent_file.py`: the run lock proves an
   intent written on this machine abandoned; one from another machine sharing the
   folder is waited for until its lease expires);
3. claim: the intent record is written;
4. the serving folder changes (under its own lock, which the Pusher takes too);
   restore, bless and a pin that brings a version back run the Pusher's serving
   check first, and publish nothing that fails it;
5. ML Metadata follows;
6. finish: the intent record goes.

The folder step is the commit point. A record left by a process that died
(kill -9), was stopped, or met a locked or damaged store after step 4 is
finished by the next serving command or run: the folder step is completed
where it was partly done (a pin), and ML Metadata made to follow. A record
whose folder step never happened is dropped: the action is undone, having
changed nothing. Either way one line says which.
"""

from __future__ import annotations

import contextlib
import dataclasses
import os
import pathlib
import sys
import time
from collections.abc import Callable, Iterator

from tpu_pipeline.common.config import PipelineConfig
from tpu_pipeline.common.run_lock import DEFAULT_WAIT_SECONDS, RunInProgressError, exclusive_run
from tpu_pipeline.components.serving import versions
from tpu_pipeline.components.serving.publish import PushResult, model_fingerprint, pushed_versions
from tpu_pipeline.components.serving.versions import ServingFolderError
from tpu_pipeline.serving_ops import protocol
from tpu_pipeline.serving_ops.local import blessing as manual_blessing
from tpu_pipeline.serving_ops.local import folder
from tpu_pipeline.serving_ops.local.baseline import follow_serving_folder
from tpu_pipeline.serving_ops.local.folder import LockWait
from tpu_pipeline.serving_ops.local.intent_file import (
    INTENT_FILE,
    LEASE_SECONDS,
    Intent,
    UnreadableIntentError,
    clear_intent,
    intent_path,
    new_intent,
    read_intent,
    write_intent,
)
from tpu_pipeline.serving_ops.protocol import (
    Lease,
    Operation,
    OperationError,
    Owner,
    Patience,
    Refused,
)

Tell = Callable[[str], None]
Step = Callable[[], list[str]]


class ServingActionError(OperationError):
    """The action was refused or could not finish; one line saying what changed and what to do."""


class _Refusal(ServingActionError, Refused):
    """The serving folder refused a step: the protocol settles the intent, then says why."""


def _to_stderr(line: str) -> None:
    print(f"tpu-pipeline: {line}", file=sys.stderr, flush=True)


class LocalStore:
    """The protocol's primitives over a run folder's intent record, used under its run lock."""

    lease_seconds = LEASE_SECONDS

    def __init__(self, config: PipelineConfig, owner: Owner):
        self.config, self.owner = config, owner

    def left_over(self) -> list[Intent]:
        try:
            intent = read_intent(self.config.run_dir)
        except UnreadableIntentError as error:
            raise ServingActionError(str(error)) from None
        return [intent] if intent is not None else []

    def lease_of(self, intent: Intent) -> Lease:
        return Lease(intent.since, intent.until)

    def is_mine(self, intent: Intent) -> bool:
        return bool(intent.holder) and intent.holder == self.owner.token

    def abandoned(self, intent: Intent, now: float) -> bool:
        # Whoever wrote it on this machine held the run lock the caller holds now: it is gone.
        return intent.written_here() or self.lease_of(intent).expired(now)

    def leaves(self, intent: Intent) -> str | None:
        return None  # everything finishing needs is in the run folder

    def taken_over(self, intent: Intent, lease: Lease) -> Intent:
        return intent.held_by(self.owner, lease)

    def claim(self, intent: Intent, over: Intent | None) -> Intent:
        if self._current() != over:
            raise protocol.Conflict(f"{INTENT_FILE} changed since it was read")
        write_intent(self.config.run_dir, intent)
        return intent

    def renew(self, intent: Intent, until: float) -> Intent:
        renewed = dataclasses.replace(self._still_mine(intent), until=until)
        write_intent(self.config.run_dir, renewed)
        return renewed

    def release(self, intent: Intent) -> None:
        current = self._current()
        if current is not None and current.holder == intent.holder:
            clear_intent(self.config.run_dir)

    def abandon(self, intent: Intent) -> None:
        write_intent(self.config.run_dir, dataclasses.replace(self._still_mine(intent), until=0.0))

    def settle(self, intent: Intent) -> str:
        try:
            return _settle(self.config, intent)
        except ServingFolderError as error:  # e.g. a pin cut short meets a folder changed by hand
            raise ServingActionError(
                f"the interrupted {intent.describe()} cannot be finished: {error}"
            ) from None

    def describe(self, intent: Intent) -> str:
        return intent.describe()

    def _current(self) -> Intent | None:
        found = self.left_over()
        return found[0] if found else None

    def _still_mine(self, intent: Intent) -> Intent:
        current = self._current()
        if current is None or current.holder != intent.holder:
            raise protocol.LostLease(
                f"{intent.describe()}: its lease ran out and another command took it over"
            )
        return current


@dataclasses.dataclass
class _Turn:
    """One action's turn at the run folder: its store, the bound on its waits, its voice."""

    config: PipelineConfig
    action: str
    store: LocalStore
    deadline: float | None
    on_wait: Callable[[str], None]
    tell: Tell

    def remaining(self) -> float | None:
        return None if self.deadline is None else max(self.deadline - time.monotonic(), 0.0)

    def lock_wait(self) -> LockWait:
        """How long the folder step may wait for the serving folder's lock."""
        return LockWait(self.remaining(), self.on_wait)

    def intent(self, version: str | None, **fields) -> Intent:
        return new_intent(self.action, version, self.store.owner, **fields)

    def settle(self) -> None:
        """Step 2: what another action left is finished or undone (or waited for)."""
        try:
            protocol.settle_left_over(self.store, self._patience(), self.tell)
        except protocol.Busy as busy:
            raise ServingActionError(f"serving {self.action}: nothing changed: {busy}") from None
        except ServingActionError as error:
            raise ServingActionError(f"serving {self.action}: not started: {error}") from None

    def carry_out(self, plan: Callable[[], Operation[Intent]]) -> list[str]:
        """Steps 3-6 by the protocol; one line per change."""
        self.settle()
        return protocol.carry_out(self.store, plan, self._patience(), self.tell)

    def _patience(self) -> Patience:
        return Patience(seconds=self.remaining(), poll=1.0)


@contextlib.contextmanager
def _serving_action(
    config: PipelineConfig,
    action: str,
    wait_seconds: float | None,
    tell: Tell,
    owner: Owner | None = None,
) -> Iterator[_Turn]:
    """Holds the run lock (step 1) for the action's turn."""
    bound = "with no bound" if wait_seconds is None else f"up to {wait_seconds:g} s"

    def waiting(holder: str) -> None:
        tell(f"serving {action}: waiting {bound} for {holder} to finish")

    deadline = None if wait_seconds is None else time.monotonic() + wait_seconds
    with contextlib.ExitStack() as stack:
        try:
            stack.enter_context(
                exclusive_run(config.run_dir, f"serving {action}", wait_seconds, waiting)
            )
        except RunInProgressError as error:
            raise ServingActionError(f"serving {action}: nothing changed: {error}") from None
        store = LocalStore(config, owner or Owner.current())
        yield _Turn(config, action, store, deadline, waiting, tell)


def _folder_step(move: Step) -> Step:
    """The commit point: a refusal of the serving folder is the protocol's refusal."""

    def step() -> list[str]:
        try:
            return move()
        except ServingFolderError as refused:
            raise _Refusal(str(refused)) from None

    return step


def _metadata(step: Step, intent: Intent) -> Step:
    """ML Metadata's step: what stops it is one line saying who finishes the action."""
    return lambda: _metadata_step(step, _unfinished(intent))


def rollback(
    config: PipelineConfig,
    reason: str,
    wait_seconds: float | None = DEFAULT_WAIT_SECONDS,
    tell: Tell = _to_stderr,
    owner: Owner | None = None,
) -> list[str]:
    """Sets the served version aside, and the next run's baseline follows; one line per change.

    Raises:
      ServingActionError: refused (nothing changed), or ML Metadata could not follow
        (the intent stays for the next command or run to finish).
    """
    base = _existing_serving_dir(config)
    with _serving_action(config, "rollback", wait_seconds, tell, owner) as turn:

        def plan() -> Operation[Intent]:
            newest = pushed_versions(base)[-1:]  # under the run lock: nothing moves them meanwhile
            intent = turn.intent(newest[0] if newest else None, set_aside=tuple(newest))

            def move() -> list[str]:
                rolled_back, served = folder.rollback(base, reason, wait=turn.lock_wait())
                return [
                    f"rolled back {rolled_back.version} to {rolled_back.path}; "
                    f"serving {served.version}"
                ]

            return Operation(
                intent, [_folder_step(move), _metadata(lambda: _follow(config), intent)]
            )

        return turn.carry_out(plan)


def pin(
    config: PipelineConfig,
    version: str,
    reason: str,
    wait_seconds: float | None = DEFAULT_WAIT_SECONDS,
    tell: Tell = _to_stderr,
    owner: Owner | None = None,
) -> list[str]:
    """Serves `version` (newer ones go aside, runs push nothing) and the baseline follows.

    A set-aside `version` is brought back only after it passes the serving check.

    Raises:
      ServingActionError: as `rollback`.
    """
    base = _existing_serving_dir(config)
    with _serving_action(config, "pin", wait_seconds, tell, owner) as turn:

        def plan() -> Operation[Intent]:
            newer = tuple(v for v in pushed_versions(base) if int(v) > _int(version))
            back = (version,) if version in versions.set_aside_versions(base) else ()
            intent = turn.intent(version, set_aside=newer, brought_back=back, reason=reason)
            check = _ServingCheck(config, "not pinned")

            def move() -> list[str]:
                moved = folder.pin(
                    base, version, reason, wait=turn.lock_wait(), before_serving=check
                )
                aside = f"; set aside {', '.join(moved)}" if moved else ""
                return [
                    *check.passed,
                    f"pinned {version}{aside}; runs push nothing until `serving unpin`",
                ]

            return Operation(
                intent, [_folder_step(move), _metadata(lambda: _follow(config), intent)]
            )

        return turn.carry_out(plan)


def restore(
    config: PipelineConfig,
    version: str,
    wait_seconds: float | None = DEFAULT_WAIT_SECONDS,
    tell: Tell = _to_stderr,
    owner: Owner | None = None,
) -> list[str]:
    """Moves a set-aside version back, once it passes the serving check; the baseline follows.

    Raises:
      ServingActionError: as `rollback`; also a version that fails the serving check.
    """
    base = _existing_serving_dir(config)
    with _serving_action(config, "restore", wait_seconds, tell, owner) as turn:

        def plan() -> Operation[Intent]:
            intent = turn.intent(version, brought_back=(version,))
            check = _ServingCheck(config, "not restored")

            def move() -> list[str]:
                restored = folder.restore(
                    base, version, wait=turn.lock_wait(), before_serving=check
                )
                serving = " (serving)" if restored.serving else ""
                return [*check.passed, f"restored {restored.version}{serving}"]

            return Operation(
                intent, [_folder_step(move), _metadata(lambda: _follow(config), intent)]
            )

        return turn.carry_out(plan)


def unpin(
    config: PipelineConfig,
    wait_seconds: float | None = DEFAULT_WAIT_SECONDS,
    tell: Tell = _to_stderr,
    owner: Owner | None = None,
) -> list[str]:
    """Removes the pin (one store: the folder, so no intent); the versions it set aside stay."""
    base = _existing_serving_dir(config)
    with _serving_action(config, "unpin", wait_seconds, tell, owner) as turn:
        turn.settle()
        try:
            record = folder.unpin(base, wait=turn.lock_wait())
        except ServingFolderError as error:
            raise ServingActionError(str(error)) from None
    return [f"unpinned {record['version']}" if record else "nothing was pinned"]


def bless(
    config: PipelineConfig,
    reason: str,
    model_id: int | None = None,
    wait_seconds: float | None = DEFAULT_WAIT_SECONDS,
    tell: Tell = _to_stderr,
    model_path: pathlib.Path | None = None,
    owner: Owner | None = None,
) -> list[str]:
    """Publishes a model the Evaluator refused, once it passes the serving check, and records
    a manual blessing of it in ML Metadata, so the next run takes it as its baseline.

    The model: the one with `model_id`, or the one at `model_path` (its folder as the
    report shows it; the run folder means its newest model); with neither, the newest.

    Raises:
      ServingActionError: refused (no reason, no such model, blessed already, a pin,
        rolled back, the serving check), or ML Metadata could not record it (the
        intent stays: the next command or run records it).
    """
    if not reason.strip():
        raise ServingActionError("serving bless: --reason must say why the Evaluator is overruled")
    if not config.metadata_path.exists():  # taking the run lock would create the run folder
        raise ServingActionError(
            f"{config.metadata_path}: no metadata store; bless a model of a run folder that has run"
        )
    with _serving_action(config, "bless", wait_seconds, tell, owner) as turn:
        turn.settle()
        chosen = _metadata_step(
            lambda: manual_blessing.candidate(
                config.metadata_path, config.full_pipeline_name, model_id, model_path
            ),
            "serving bless: nothing changed: ML Metadata cannot be read",
        )
        if chosen.is_blessed():
            raise ServingActionError(
                f"model {chosen.model.id} ({chosen.model.uri}) is blessed already; nothing to do"
            )

        def plan() -> Operation[Intent]:
            intent = turn.intent(None, reason=reason, model_id=chosen.model.id)
            check = _ServingCheck(config, "not blessed")
            pushed: list[PushResult] = []
            cards: list[str] = []

            def write_card(push: PushResult) -> None:
                serving_check = (
                    check.passed[0].removeprefix("serving check: ") if check.passed else None
                )
                try:
                    written = manual_blessing.write_model_card(
                        chosen, reason, push, config, serving_check
                    )
                except Exception as error:  # noqa: BLE001 (the version is published: say, go on)
                    cards.append(f"model card: not written ({type(error).__name__}: {error})")
                    return
                cards.extend([f"model card: {written}"] if written else [])

            def publish() -> list[str]:
                push = manual_blessing.publish(
                    chosen, str(config.serving_dir), turn.lock_wait(), check, write_card
                )
                pushed.append(push)
                how = "pushed as version" if push.newly_pushed else "already served as version"
                return [
                    f"blessed model {chosen.model.id} ({chosen.model.uri}) by hand ({reason})",
                    *check.passed,
                    f"{how} {push.version}: {push.version_dir}",
                    *cards,
                ]

            def record() -> list[str]:
                recorded = manual_blessing.record(chosen, reason, pushed[0], config.run_dir)
                return [
                    f"ML Metadata: recorded the manual blessing (blessing {recorded.blessing_id})"
                ]

            return Operation(intent, [_folder_step(publish), _metadata(record, intent)])

        return turn.carry_out(plan)


def finish_interrupted_action(
    config: PipelineConfig, tell: Tell = _to_stderr, owner: Owner | None = None
) -> None:
    """Finishes or undoes the action a dead process left half-done, saying which in one line.

    The caller holds the run lock: a run before it resolves its baseline, or a serving action.

    Raises:
      ServingActionError: ML Metadata still cannot follow (the intent stays), or another
        machine's action holds the folder under a live lease.
    """
    store = LocalStore(config, owner or Owner.current())
    try:
        protocol.settle_left_over(store, Patience(seconds=0), tell)
    except protocol.Busy as busy:
        raise ServingActionError(str(busy)) from None


def finish_interrupted_action_if_free(
    config: PipelineConfig, tell: Tell = _to_stderr, owner: Owner | None = None
) -> None:
    """For a command that only reads (`serving list`): finishes a half-done action now unless a
    run or an action holds the run folder, which then finishes it itself. A live intent of
    another machine's action is left to it, and said so."""
    if not intent_path(config.run_dir).exists():
        return
    store = LocalStore(config, owner or Owner.current())
    try:
        with exclusive_run(config.run_dir, "serving list"):
            live = protocol.settle_left_over(store, Patience(seconds=0), tell, wait_for_live=False)
    except RunInProgressError as error:
        tell(f"an interrupted serving action is left for whoever holds the run folder: {error}")
        return
    for intent in live:
        until = store.lease_of(intent).when()
        tell(f"{intent.describe()} is in progress (lease until {until}); left to it")


class _ServingCheck:
    """The Pusher's serving check (same budget, same refusal), as a step's `before_*` hook."""

    def __init__(self, config: PipelineConfig, refusal: str):
        self._num_classes = config.dataset.num_classes
        self._timeout = config.serving.check_timeout_seconds
        self._refusal = refusal
        self.passed: list[str] = []

    def __call__(self, model_dir: str) -> None:
        # TensorFlow and the model server's client: only when a version is to be published.
        from tpu_pipeline.components.serving.server_check import ServingCheckError, check_model

        try:
            result = check_model(model_dir, self._num_classes, self._timeout)
        except ServingCheckError as error:
            raise ServingFolderError(
                f"{self._refusal}: the candidate failed the serving check, nothing was "
                f"published: {error}"
            ) from None
        self.passed.append(f"serving check: {result.to_text()}")


def _int(version: str) -> int:
    if not version.isdigit():
        raise ServingActionError(
            f"{version}: a version is a folder name, all digits; `tpu-pipeline serving list` "
            "shows them"
        )
    return int(version)


def _existing_serving_dir(config: PipelineConfig) -> str:
    base = str(config.serving_dir)
    if not versions.exists(base):
        raise ServingActionError(
            f"{base}: no serving folder (no model was pushed there); check --dataset, "
            "--output-dir or --config"
        )
    return base


def _unfinished(intent: Intent) -> str:
    """What a failed ML Metadata step leaves, and who finishes it."""
    then = "records the blessing" if intent.action == "bless" else "makes ML Metadata follow"
    return (
        f"{intent.describe()} changed the serving folder, and the next `tpu-pipeline serving` "
        f"command or run {then} ({INTENT_FILE} stays); ML Metadata failed now"
    )


def _metadata_step(step: Callable, situation: str):
    """Runs an ML Metadata step; what stops it becomes one line: `situation` and why."""
    try:
        return step()
    except ServingFolderError as error:  # a refusal (no such model), before anything changed
        raise ServingActionError(str(error)) from None
    # Whatever the store raised: LockedMetadataError or DamagedMetadataError from the
    # check, MLMD's AbortedError when the store stays locked, RuntimeError when it cannot
    # open it. Never a traceback; the intent, if any, stays.
    except Exception as error:  # noqa: BLE001
        why = str(error).splitlines()[0] if str(error) else ""
        raise ServingActionError(f"{situation} ({type(error).__name__}: {why})") from None


def _follow(config: PipelineConfig) -> list[str]:
    """Step 5 of rollback, pin and restore: ML Metadata's blessings follow the serving folder."""
    changed = follow_serving_folder(
        config.metadata_path, config.full_pipeline_name, str(config.serving_dir)
    )
    return [
        f"baseline: {what} {len(ids)} blessing(s) in ML Metadata"
        for what, ids in changed.items()
        if ids
    ]


def _settle(config: PipelineConfig, intent: Intent) -> str:
    """Finishes `intent` if its folder step had begun, else drops it; the line saying which."""
    interrupted = f"the interrupted {intent.describe()}"
    if intent.action == "bless":
        return _settle_bless(config, intent, interrupted)
    base = str(config.serving_dir)
    aside, in_place = set(versions.set_aside_versions(base)), set(pushed_versions(base))
    record = versions.pinned(base)
    pinned = record is not None and record["version"] == intent.version
    begun = (
        any(v in aside for v in intent.set_aside)
        or any(v in in_place for v in intent.brought_back)
        or (intent.action == "pin" and pinned)
    )
    if not begun:
        return f"undid {interrupted}: it had moved no version, so nothing changed"
    completed = ""
    if intent.action == "pin" and not pinned:  # cut short between its moves: pin is repeatable
        check = _ServingCheck(config, "the pin stays unfinished")
        folder.pin(base, intent.version, intent.reason, before_serving=check)
        completed = "finished its moves; "
    changes = _metadata_step(lambda: _follow(config), _unfinished(intent))
    followed = "; ".join(changes) if changes else "ML Metadata agreed already"
    return f"finished {interrupted}: {completed}{followed}"


def _settle_bless(config: PipelineConfig, intent: Intent, interrupted: str) -> str:
    """A blessing cut short: recorded if its model was published, else dropped."""
    chosen = _metadata_step(
        lambda: manual_blessing.candidate(
            config.metadata_path, config.full_pipeline_name, intent.model_id
        ),
        _unfinished(intent),
    )
    if chosen.is_blessed():
        return f"finished {interrupted}: ML Metadata had recorded it already"
    base = str(config.serving_dir)
    fingerprint = model_fingerprint(chosen.model_dir)
    served = [
        v for v in pushed_versions(base) if model_fingerprint(os.path.join(base, v)) == fingerprint
    ]
    if not served:
        return f"undid {interrupted}: nothing was published, so nothing changed"
    push = PushResult(os.path.join(base, served[-1]), served[-1], newly_pushed=False)
    recorded = _metadata_step(
        lambda: manual_blessing.record(chosen, intent.reason, push, config.run_dir),
        _unfinished(intent),
    )
    return (
        f"finished {interrupted}: recorded the manual blessing of version {push.version} "
        f"(blessing {recorded.blessing_id})"
    )
