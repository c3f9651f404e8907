"""``python -m worker.health``: the worker's readiness and liveness probes (``worker.monitoring.health``)."""

from worker.monitoring.health import main

if __name__ == "__main__":
    main()
