"""nodelet: a Python node agent that runs Kubernetes pods on containerd."""

__version__ = "0.1.0"
