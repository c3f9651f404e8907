"""``python -m worker.exporter``: what Redis knows, for Prometheus and KEDA (``worker.monitoring.exporter``)."""

from worker.monitoring.exporter import main

if __name__ == "__main__":
    main()
