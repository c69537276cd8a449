"""bucketing: FSDP collective pre-bucketing passes for torch.fx graphs (torch 2.13)."""
