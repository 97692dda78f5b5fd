"""A TCP proxy in front of a test server that can cut a connection right after it forwarded a
given command: the server applies the command, the client never hears the reply."""

from __future__ import annotations

import socket
import threading
import time


def shut(*socks: socket.socket) -> None:
    """Ends both directions of each socket (a peer that is gone already is no error)."""
    for s in socks:
        try:
            s.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


class Front:
    """A listener on a free local port for a server on ``target_port``: each connection it
    accepts is served (``_serve``) on a thread of its own until ``close()``."""

    def __init__(self, target_port: int):
        self.target = target_port
        self.listener = socket.socket()
        self.listener.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self.listener.bind(("127.0.0.1", 0))
        self.listener.listen(64)
        self.port = self.listener.getsockname()[1]
        self._closed = False

    def start(self) -> None:
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        while not self._closed:
            try:
                conn, _ = self.listener.accept()
            except OSError:
                return
            threading.Thread(target=self._serve, args=(conn,), daemon=True).start()

    def _serve(self, conn: socket.socket) -> None:
        raise NotImplementedError

    def close(self) -> None:
        self._closed = True
        self.listener.close()


class CuttingProxy(Front):
    def __init__(self, target_port: int):
        super().__init__(target_port)
        self.cut_on: bytes | None = None
        self.cuts = 0
        self.seen: list[bytes] = []
        self._mutex = threading.Lock()
        self.start()

    def cut_next(self, marker: bytes) -> None:
        """The next client write containing ``marker`` reaches the server, then both ends close."""
        with self._mutex:
            self.cut_on = marker

    def _serve(self, client: socket.socket) -> None:
        server = socket.create_connection(("127.0.0.1", self.target))
        pair = {"cut": False}
        threading.Thread(target=self._pump_down, args=(server, client, pair), daemon=True).start()
        self._pump_up(client, server, pair)

    def _pump_up(self, client: socket.socket, server: socket.socket, pair: dict) -> None:
        try:
            while True:
                data = client.recv(65536)
                if not data:
                    break
                self.seen.append(data)
                with self._mutex:
                    cut = self.cut_on is not None and self.cut_on in data
                    if cut:
                        self.cut_on = None
                        self.cuts += 1
                        pair["cut"] = True
                server.sendall(data)
                if cut:
                    time.sleep(0.1)  # let the server apply it; its reply is dropped
                    break
        except OSError:
            pass
        shut(client, server)
        client.close()
        server.close()

    def _pump_down(self, server: socket.socket, client: socket.socket, pair: dict) -> None:
        try:
            while True:
                data = server.recv(65536)
                if not data or pair["cut"]:
                    break
                client.sendall(data)
        except OSError:
            pass
        if not pair["cut"]:  # the server closed: so does the client's side
            shut(client, server)


class TlsFront(Front):
    """TLS in front of a plaintext server, for servers built without TLS (the PyPI Redis 8.2
    and Valkey 9): the client's handshake, certificate check and client certificate are
    checked here, as the server would, and the bytes pass through unchanged."""

    def __init__(self, target_port: int, certfile: str, keyfile: str, cafile: str):
        import ssl

        super().__init__(target_port)
        ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ctx.load_cert_chain(certfile, keyfile)
        ctx.load_verify_locations(cafile)
        ctx.verify_mode = ssl.CERT_REQUIRED
        self.ctx = ctx
        self.start()

    def _serve(self, raw: socket.socket) -> None:
        try:
            client = self.ctx.wrap_socket(raw, server_side=True)
        except OSError:
            raw.close()
            return
        server = socket.create_connection(("127.0.0.1", self.target))

        def pump(a: socket.socket, b: socket.socket) -> None:
            try:
                while True:
                    data = a.recv(65536)
                    if not data:
                        break
                    b.sendall(data)
            except OSError:
                pass
            shut(a, b)

        threading.Thread(target=pump, args=(server, client), daemon=True).start()
        pump(client, server)
