"""PreferredLeaderElection: leadership back on the preferred replicas (KIP-183), or an unclean election (KIP-460)."""
