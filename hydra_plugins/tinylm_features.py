"""tinylm's features for Hydra (``conf/features.py``), found at every start: each feature
group's defaults as the config ``feature_settings`` that ``conf/config.yaml`` includes.

Hydra imports every module of the ``hydra_plugins`` namespace before it composes a config (for
``python train.py`` and for the compose API alike), which is why the defaults are stored here.
"""

from __future__ import annotations

from dataclasses import asdict

from hydra.core.config_store import ConfigStore

from conf.features import feature_groups

ConfigStore.instance().store(
    name="feature_settings", node={name: asdict(cls()) for name, cls in feature_groups().items()}
)
