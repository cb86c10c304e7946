"""The serving control plane: every operation on serving state, on a local folder or on Vertex AI.

- `protocol.py`: the one order every action keeps (settle what other actors left, claim an
  intent naming its owner under a lease, ordered steps, finish), over a backend's primitives.
- `local/`: the run folder's backend.
  - `actions.py`: rollback, pin, unpin, restore and bless (the command line calls only these).
  - `intent_file.py`: the intent record `.serving-intent.json`, its owner and lease.
  - `folder.py`: moving version folders aside and back, never losing one.
  - `baseline.py`: ML Metadata's blessings follow the serving folder (the next baseline).
  - `blessing.py`: a manual blessing published and recorded in ML Metadata.
  - `history.py`: what ML Metadata knows of each served version (`serving list`).
- `vertex/`: the Vertex AI backend.
  - `actions.py`: rollback, pin, unpin, restore, bless and list on the registry entry.
  - `intents.py`: intent labels on registry versions, their owner and lease.
  - `entry.py`: the entry and its versions; label writes as read-modify-writes on `etag`.
  - `aliases.py`: what each action changes in labels and aliases, decided from a read.
  - `blessing.py`, `metadata_blessing.py`: a manual blessing in the registry and in
    Vertex ML Metadata.
  - `baseline.py`: Vertex ML Metadata's blessings follow the registry.
  - `endpoint.py`: the endpoint's traffic follows the version that serves.
  - `transport.py`: which calls are repeated, and the dry run's recorder.
  - `pusher.py`: the registry Pusher TFX runs inside Vertex AI Pipelines.

The version folders' layout and the Pusher that publishes into them stay in `components/`
(`components/serving/versions.py`, `components/pusher.py`): TFX runs the Pusher by its
module path, and a component imports nothing above it.
"""

from tpu_pipeline import common  # noqa: F401 (sets TF_USE_LEGACY_KERAS before TensorFlow loads)
