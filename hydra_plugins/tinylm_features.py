"""tinylm's features for Hydra: each feature group's defaults as the config ``feature_settings``,
each feature's config folder on the search path, and its Hydra plugins. They live here because
Hydra imports this namespace before it composes any config (``train.py`` and compose alike).
"""

from __future__ import annotations

from dataclasses import asdict

from hydra.core.config_search_path import ConfigSearchPath
from hydra.core.config_store import ConfigStore
from hydra.plugins.search_path_plugin import SearchPathPlugin

from conf.features import feature_groups, features, hook

ConfigStore.instance().store(
    name="feature_settings", node={name: asdict(cls()) for name, cls in feature_groups().items()}
)


class FeatureConfigs(SearchPathPlugin):
    """Each feature's ``conf/`` folder, searched after tinylm's own."""

    def manipulate_search_path(self, search_path: ConfigSearchPath) -> None:
        for feature in features():
            if feature.conf_dir is not None:
                search_path.append(f"tinylm-{feature.name}", f"file://{feature.conf_dir}")


# Hydra instantiates plugins only from the hydra_plugins package, under the names it finds
# them by: each feature's plugin as a class of this module (its _target_ names it here).
globals().update(
    {
        name: type(name, (hook(target),), {"__module__": __name__})
        for f in features()
        for target in f.hydra_plugins
        for name in [target.rpartition(":")[2]]
    }
)
