"""Model repositories: configs as ModelConfig messages, names checked, files written atomically."""

from .config import ModelConfig, model_config
from .names import check_name
from .repository import ModelRepository
from .sequence_config import is_stateful, sequence_batching

__all__ = ["ModelConfig", "ModelRepository", "check_name", "is_stateful", "model_config", "sequence_batching"]
