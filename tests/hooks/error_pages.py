"""Error answers as a load balancer in front of the API server sends them.

HAProxy's default 502 page carries no ``Date`` header; other proxies add one.
"""

from __future__ import annotations

import email.utils

BAD_GATEWAY_BODY = (
    b"<html><body><h1>502 Bad Gateway</h1>\n"
    b"The server returned an invalid or incomplete response.\n"
    b"</body></html>\n"
)


def bad_gateway(*, dated: bool) -> bytes:
    """A whole 502 answer in HAProxy's default shape, with a ``Date`` when ``dated``."""
    head = [
        b"HTTP/1.1 502 Bad Gateway",
        b"content-length: " + str(len(BAD_GATEWAY_BODY)).encode(),
        b"cache-control: no-cache",
        b"content-type: text/html",
        b"connection: close",
    ]
    if dated:
        head.append(b"date: " + email.utils.formatdate(usegmt=True).encode())
    return b"\r\n".join(head) + b"\r\n\r\n" + BAD_GATEWAY_BODY
