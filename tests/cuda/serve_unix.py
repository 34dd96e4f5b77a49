#!/usr/bin/env python3
"""Listens on a unix socket and runs `runsnack cuda-server --fd 3` for each
connection: the session the provider service makes, without the network.
usage: serve_unix.py RUNSNACK_BIN SOCKET_PATH [driver|host]
Without a backend argument the server's default applies ($RUNSNACK_CUDA_BACKEND, else driver)."""
import os
import socket
import subprocess
import sys

binary, path = sys.argv[1], sys.argv[2]
backend = ["--backend", sys.argv[3]] if len(sys.argv) > 3 else []
if os.path.exists(path):
    os.unlink(path)
listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
listener.bind(path)
listener.listen(8)
print("listening", path, flush=True)
while True:
    conn, _ = listener.accept()
    fd = conn.fileno()
    subprocess.Popen([binary, "cuda-server", "--fd", "3", *backend],
                     preexec_fn=lambda: os.dup2(fd, 3), pass_fds=(3,))
    conn.close()
