# SPDX-License-Identifier: Apache-2.0
"""The scriptable backend moved to peers.py; this name stays for the tests
written before it moved."""
from peers import SSE_HEAD, Backend, Conn, Request, read_request, sse_handler  # noqa: F401
