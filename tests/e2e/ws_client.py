"""A small hostile WebSocket client (RFC 6455, standard library only) for attacks on the coordinator's
/worker socket: it sends what a test tells it, including frames no browser would send."""

import base64
import os
import socket
import struct


class WsClient:
    def __init__(self, port, path="/worker", host="127.0.0.1", origin=None, timeout=30):
        self.sock = socket.create_connection((host, port), timeout=timeout)
        key = base64.b64encode(os.urandom(16)).decode()
        lines = ["GET %s HTTP/1.1" % path, "Host: %s:%d" % (host, port), "Upgrade: websocket", "Connection: Upgrade",
                 "Sec-WebSocket-Key: " + key, "Sec-WebSocket-Version: 13"]
        if origin:
            lines.append("Origin: " + origin)
        self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode())
        self.buf = b""
        while b"\r\n\r\n" not in self.buf:
            data = self.sock.recv(4096)
            if not data:
                raise ConnectionError("closed during the upgrade")
            self.buf += data
        head, self.buf = self.buf.split(b"\r\n\r\n", 1)
        self.status = int(head.split(b" ")[1])

    def send_frame_header(self, length, opcode=0x1):
        """A masked frame's header announcing `length` bytes (the payload may never follow)."""
        if length < 126:
            head = bytes([0x80 | opcode, 0x80 | length])
        elif length < 65536:
            head = bytes([0x80 | opcode, 0x80 | 126]) + struct.pack(">H", length)
        else:
            head = bytes([0x80 | opcode, 0x80 | 127]) + struct.pack(">Q", length)
        self.mask = os.urandom(4)
        self.sock.sendall(head + self.mask)

    def send_text(self, text):
        data = text.encode()
        self.send_frame_header(len(data))
        self.sock.sendall(bytes(b ^ self.mask[i % 4] for i, b in enumerate(data)))

    def _read(self, n):
        while len(self.buf) < n:
            data = self.sock.recv(65536)
            if not data:
                raise ConnectionError("closed")
            self.buf += data
        out, self.buf = self.buf[:n], self.buf[n:]
        return out

    def recv_text(self):
        """The next text message, or None when the server closes (close frame or end of stream); TimeoutError
        when it does neither."""
        try:
            while True:
                b0, b1 = self._read(2)
                n = b1 & 0x7F
                if n == 126:
                    n = struct.unpack(">H", self._read(2))[0]
                elif n == 127:
                    n = struct.unpack(">Q", self._read(8))[0]
                payload = self._read(n)
                opcode = b0 & 0x0F
                if opcode == 0x8:
                    return None
                if opcode == 0x1:
                    return payload.decode()
        except TimeoutError:
            raise  # the server kept the socket open: a test that expects a close fails
        except (ConnectionError, OSError):
            return None

    def close(self):
        self.sock.close()
