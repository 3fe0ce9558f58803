"""Planning: the side-effect-free diff of desired manifests against committed chains."""
