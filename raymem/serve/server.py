"""``raymem serve``: a local Ray, the Serve app on host:port, and a clean stop on Ctrl-C."""

import logging
import os
import signal
import threading
import time

from raymem.actors.layout import checkpoint_profiles
from raymem.config import Settings

log = logging.getLogger(__name__)

MIN_CPUS = 2  # Ray's CPUs on a smaller machine: the model pools need one each
STOP_POLL_S = 0.2  # how soon Ctrl-C is noticed


def start(settings: Settings, *, num_cpus: int | None = None) -> None:
    """Start a local Ray (unless one is already initialised) and deploy the app."""
    os.environ.setdefault("RAY_USAGE_STATS_ENABLED", "0")
    import ray
    from ray import serve

    from raymem.serve.app import build_app
    from raymem.serve.auth import check_listen_address

    check_listen_address(settings)
    if not ray.is_initialized():
        # address="local": never join a stale cluster an earlier `ray start` left behind.
        ray.init(
            address="local",
            num_cpus=num_cpus or max(MIN_CPUS, os.cpu_count() or MIN_CPUS),
            include_dashboard=False,  # the metrics agent runs without it (measured)
            _metrics_export_port=settings.server.metrics_port,
            log_to_driver=False,
            namespace=settings.namespace,
        )
    serve.start(
        http_options={"host": settings.server.host, "port": settings.server.port},
        logging_config={"enable_access_log": False},
    )
    serve.run(build_app(settings), name=settings.app_name, route_prefix="/", blocking=False)


def stop() -> None:
    import ray
    from ray import serve

    try:
        serve.shutdown()  # type: ignore[no-untyped-call]  # unannotated in Ray
    finally:
        ray.shutdown()


def serve_forever(settings: Settings) -> None:
    """Run until SIGINT or SIGTERM, then shut Serve and Ray down."""
    stopping = threading.Event()
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stopping.set())
    start(settings)
    print(
        f"raymem serving on http://{settings.server.host}:{settings.server.port}"
        f" (data in {settings.data_dir}; metrics on port {settings.server.metrics_port});"
        " Ctrl-C stops it",
        flush=True,
    )
    while not stopping.is_set():
        time.sleep(STOP_POLL_S)
    print("raymem stopping", flush=True)
    stop()
    checkpoint_profiles(settings)
    print("raymem stopped", flush=True)
