"""``torch.distributed.constants``: the default timeout of process-group operations."""
from ember.distributed._pg import default_pg_timeout

__all__ = ["default_pg_timeout"]
