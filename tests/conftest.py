"""Test-session defaults: W&B never reaches the network and writes under a temporary folder."""

import os
import tempfile

os.environ.setdefault("WANDB_MODE", "offline")
os.environ.setdefault("WANDB_DIR", tempfile.mkdtemp(prefix="lightning-info-wandb-"))
os.environ.setdefault("WANDB_QUIET", "true")
