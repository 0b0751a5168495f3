"""A TCP proxy in front of the S3 server, for faults a real server does not make on demand.

It can break an answer after some bytes (a connection dropped mid-way), change one byte of an
answer (bytes damaged in transit), or refuse requests made over a signed URL (a store that does
not allow them), and relays everything else unchanged.
"""

from __future__ import annotations

import contextlib
import socket
import threading

ACCESS_DENIED = b"<Error><Code>AccessDenied</Code><Message>signed URLs are not allowed here</Message></Error>"


class StorageProxy:
    """One proxy on a free port of 127.0.0.1; every connection to it is relayed to ``target``."""

    def __init__(
        self, target: str, *, cut_after: int | None = None, flip_at: int | None = None, refuse_signed: bool = False
    ) -> None:
        host, port = target.removeprefix("http://").split(":")
        self.target = (host, int(port))
        self.cut_after = cut_after
        self.flip_at = flip_at
        self.refuse_signed = refuse_signed
        self.refused = 0  # requests answered 403 for their signed URL
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.url = f"http://127.0.0.1:{self.listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(client,), daemon=True).start()

    def _serve(self, client: socket.socket) -> None:
        head = client.recv(65536)
        if self.refuse_signed and b"Signature=" in head.split(b"\r\n", 1)[0]:
            self.refused += 1
            answer = b"HTTP/1.1 403 Forbidden\r\nContent-Length: %d\r\nConnection: close\r\n\r\n" % len(ACCESS_DENIED)
            with contextlib.suppress(OSError):
                client.sendall(answer + ACCESS_DENIED)
            client.close()
            return
        server = socket.create_connection(self.target)
        server.sendall(head)
        threading.Thread(target=self._relay, args=(client, server, False), daemon=True).start()
        self._relay(server, client, True)

    def _relay(self, source: socket.socket, sink: socket.socket, answers: bool) -> None:
        relayed = 0
        with contextlib.suppress(OSError):  # either side closing ends the relay
            while data := source.recv(65536):
                if answers and self.flip_at is not None and relayed <= self.flip_at < relayed + len(data):
                    at = self.flip_at - relayed
                    data = data[:at] + bytes([data[at] ^ 0x01]) + data[at + 1 :]
                sink.sendall(data)
                relayed += len(data)
                if answers and self.cut_after is not None and relayed > self.cut_after:
                    break
        for sock in (source, sink):
            with contextlib.suppress(OSError):  # the other side may have closed it already
                sock.shutdown(socket.SHUT_RDWR)
            sock.close()

    def close(self) -> None:
        self.listener.close()
