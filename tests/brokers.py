"""Switching this process's Celery app to another broker, and a broker that cannot be reached."""

import os
import socket

import kombu.pools

from bench.celery import app as celery_app


def use_broker(url: str) -> None:
    """Switch this process's Celery app to another broker: forget every pooled connection and producer. (Celery
    reads CELERY_BROKER_URL from the environment before its configuration, so both change.)"""
    os.environ["CELERY_BROKER_URL"] = url
    celery_app.conf.broker_url = url
    if celery_app._pool is not None:
        celery_app._pool.force_close_all()
    celery_app._pool = None
    celery_app.amqp._producer_pool = None
    kombu.pools.reset()


def closed_port_url() -> str:
    """A Redis URL on 127.0.0.1 at a port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        port = sock.getsockname()[1]
    return f"redis://127.0.0.1:{port}/0"


class FrozenBroker:
    """A server on 127.0.0.1 that accepts every connection and never answers: a broker that hangs, not one that is
    down. Its URL is a Redis URL; ``close()`` stops it."""

    def __init__(self) -> None:
        self.sock = socket.socket()
        self.sock.bind(("127.0.0.1", 0))
        self.sock.listen(64)  # the kernel completes the connections; nobody ever reads from them
        self.url = f"redis://127.0.0.1:{self.sock.getsockname()[1]}/0"

    def close(self) -> None:
        self.sock.close()
