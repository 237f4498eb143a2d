"""PartitionReassignment: explicit or generated target replicas, carried out through KIP-455."""
