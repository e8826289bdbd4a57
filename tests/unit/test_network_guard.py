import socket

import pytest


def test_outside_connection_is_refused():
    with pytest.raises(OSError, match="blocked"):
        socket.create_connection(("93.184.216.34", 80), timeout=1)


def test_connect_ex_and_datagrams_are_refused():
    with socket.socket() as s, pytest.raises(OSError, match="blocked"):
        s.connect_ex(("93.184.216.34", 80))
    with socket.socket(socket.AF_INET, socket.SOCK_DGRAM) as s, pytest.raises(OSError, match="blocked"):
        s.sendto(b"x", ("8.8.8.8", 53))


def test_dns_lookup_is_refused():
    with pytest.raises(OSError, match="blocked"):
        socket.getaddrinfo("example.org", 443)


def test_loopback_is_allowed():
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(1)
    client = socket.create_connection(server.getsockname(), timeout=1)
    client.close()
    server.close()
