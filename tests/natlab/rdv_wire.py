"""The rendezvous wire (src/signaling/rdv_codec.hpp) for tests and benchmarks, standard library only.

Frames are a u32 big-endian length and one JSON object. A provider proves its PeerId by signing the
rendezvous' challenge with its Ed25519 key; Ed25519Key does that with the `openssl` command (no
Python packages needed), so a test can be an honest provider of its own key, or a liar about
someone else's.
"""
import base64
import hashlib
import json
import os
import socket
import struct
import subprocess
import tempfile
import time


def frame(obj):
    body = json.dumps(obj).encode() if not isinstance(obj, bytes) else obj
    return struct.pack("!I", len(body)) + body


def recv_exact(s, n, deadline):
    out = b""
    while len(out) < n:
        s.settimeout(max(0.01, deadline - time.time()))
        chunk = s.recv(n - len(out))
        if not chunk:
            raise ConnectionError("closed")
        out += chunk
    return out


def read_msg(s, timeout=5.0):
    deadline = time.time() + timeout
    (n,) = struct.unpack("!I", recv_exact(s, 4, deadline))
    return json.loads(recv_exact(s, n, deadline))


def b32(data):
    return base64.b32encode(data).decode().rstrip("=").lower()


def b32decode(text):
    return base64.b32decode(text.upper() + "=" * (-len(text) % 8))


def proof_message(nonce, peer):
    return b"runsnack rendezvous register v1\0" + nonce + peer.encode()


class Ed25519Key:
    """An Ed25519 key held in a temp file; signs with `openssl pkeyutl -rawin`."""

    def __init__(self):
        self.dir = tempfile.mkdtemp(prefix="rdv-key-")
        self.pem = os.path.join(self.dir, "key.pem")
        subprocess.run(["openssl", "genpkey", "-algorithm", "ed25519", "-out", self.pem], check=True,
                       capture_output=True)
        der = subprocess.run(["openssl", "pkey", "-in", self.pem, "-pubout", "-outform", "DER"], check=True,
                             capture_output=True).stdout
        self.public = der[-32:]
        self.peer = b32(hashlib.sha256(self.public).digest())[:32]

    def sign(self, message):
        path = os.path.join(self.dir, "message")
        with open(path, "wb") as f:
            f.write(message)
        return subprocess.run(["openssl", "pkeyutl", "-sign", "-rawin", "-inkey", self.pem, "-in", path], check=True,
                              capture_output=True).stdout

    def prove(self, challenge, peer=None):
        """The prove{} answer to a challenge{} for `peer` (default: this key's own PeerId)."""
        peer = peer or self.peer
        return {"t": "prove", "key": b32(self.public), "sig": b32(self.sign(proof_message(b32decode(challenge["nonce"]),
                                                                                          peer)))}


def register(addr, key, grants, timeout=5.0):
    """An honest provider of `key` registered at `addr`; returns the socket (read its intros with provider_intro)."""
    s = socket.create_connection(addr, timeout=timeout)
    s.sendall(frame({"t": "register", "peer": key.peer, "grants": grants, "candidates": []}))
    challenge = read_msg(s, timeout)
    assert challenge["t"] == "challenge", challenge
    s.sendall(frame(key.prove(challenge)))
    reply = read_msg(s, timeout)
    assert reply["t"] == "registered", reply
    return s


def provider_intro(s, timeout=5.0):
    """The next intro a registered provider socket receives (pings are answered)."""
    deadline = time.time() + timeout
    while True:
        m = read_msg(s, max(0.01, deadline - time.time()))
        if m["t"] == "ping":
            s.sendall(frame({"t": "pong", "n": m["n"]}))
        elif m["t"] == "intro":
            return m
