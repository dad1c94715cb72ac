"""A module of warm_mlp.py's own (imported in its set-up with WARM_MLP_HELPER=1): the staleness test changes it."""
HIDDEN_DEFAULT = 32
