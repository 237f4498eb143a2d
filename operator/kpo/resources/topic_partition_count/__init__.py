"""TopicPartitionCount: grow a topic through CreatePartitions, with a key-ordering guard and a key-remap report."""
