"""``torch.distributed._composable``: where FSDP2's ``fully_shard`` was first published."""
