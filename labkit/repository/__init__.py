"""Model repositories: configs as ModelConfig messages, names checked, files written atomically."""

from .config import ModelConfig, model_config
from .names import check_name
from .repository import ModelRepository

__all__ = ["ModelConfig", "ModelRepository", "check_name", "model_config"]
