"""Which Ray cluster a run joins: an explicit address, else ``RAY_ADDRESS``, else a local Ray.

Ray's own ``ray.init()`` without an address joins the cluster that ``ray start`` left on this
machine; rlf starts a local Ray of its own instead unless told otherwise, and checks that a
``host:port`` answers before ``ray.init`` retries it for minutes.
"""

from __future__ import annotations

import os
import socket
from typing import Optional

from rlf.utils.errors import UserError

__all__ = ["resolve_ray_address", "check_cluster_address", "init_ray"]


def resolve_ray_address(address: Optional[str]) -> Optional[str]:
    """The cluster a run joins.

    Args:
        address: an explicit address (``host:port``, ``'auto'``, ``ray://host:port``), or
            ``'local'`` or None.

    Returns:
        ``address`` if given, else the ``RAY_ADDRESS`` environment variable (``ray job
        submit`` sets it) if set; None (start a local Ray) where that is empty or ``'local'``.
    """
    address = address or os.environ.get("RAY_ADDRESS") or None
    return None if address == "local" else address


def check_cluster_address(address: Optional[str], timeout: float = 10.0) -> None:
    """Checks that something listens at a ``host:port`` cluster address before ``ray.init``,
    which retries a dead address for minutes, printing only its own connection warnings.
    ``None``, ``"auto"`` and ``ray://`` (Ray Client) addresses are left to Ray.

    Args:
        address: the address ``resolve_ray_address`` gave.
        timeout: seconds to wait for a TCP connection.

    Raises:
        UserError: (a ``ValueError``) for a malformed ``host:port`` or one where nothing
            answers within ``timeout`` seconds, naming the address and the fix.
    """
    if not address or address == "auto" or "://" in address:
        return
    host, _, port = address.rpartition(":")
    if not host or not port.isdigit():
        raise UserError(f"Ray cluster address {address!r} is not host:port (e.g. "
                        f"'10.0.0.1:6379'), 'auto' or 'ray://host:10001'")
    try:
        socket.create_connection((host, int(port)), timeout=timeout).close()
    except OSError as e:
        raise UserError(f"no Ray cluster answers at {address} ({e}); start one there "
                        f"(`ray start --head --port={port}` on {host}) or correct the "
                        f"address") from None


def init_ray(address: Optional[str], local_num_cpus: Optional[int],
             log_to_driver: bool) -> None:
    """Starts Ray in this process: joins the cluster ``resolve_ray_address(address)`` names,
    else starts a local instance of ``local_num_cpus`` CPUs (None: the machine's), never one
    that ``ray start`` left running on this machine.

    Args:
        address: as ``resolve_ray_address`` takes it.
        local_num_cpus: the local instance's CPUs; unused on a cluster (it has its own).
        log_to_driver: whether Ray's workers print to this process's terminal.

    Raises:
        UserError: (a ``ValueError``) for an address where nothing answers
            (``check_cluster_address``) or that Ray cannot connect to (``'auto'`` without a
            running cluster).
    """
    import ray
    address = resolve_ray_address(address)
    check_cluster_address(address)
    try:
        ray.init(address=address or "local", num_cpus=None if address else local_num_cpus,
                 include_dashboard=False, log_to_driver=log_to_driver)
    except ConnectionError as e:  # "auto" without a running cluster
        raise UserError(f"Ray cluster address {address!r}: {e}") from None
