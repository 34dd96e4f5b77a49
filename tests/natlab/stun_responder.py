#!/usr/bin/env python3
"""A minimal STUN (RFC 5389) binding responder for the NAT lab.

miniupnpd's `ext_perform_stun` sends four Binding Requests (with and without
CHANGE-REQUEST) from four sockets and only enables port forwarding when all
four come back, from the address it asked, each carrying the request's own
source address. So this answers every Binding Request from the socket it
arrived on (CHANGE-REQUEST is ignored on purpose) with XOR-MAPPED-ADDRESS
and MAPPED-ADDRESS set to the request's source.

    request  : type 0x0001 | length | cookie 0x2112A442 | transaction id (12)
    response : type 0x0101 | length 24 | cookie | transaction id
               | XOR-MAPPED-ADDRESS (0x0020, 8) | MAPPED-ADDRESS (0x0001, 8)

Usage: stun_responder.py LISTEN_IP [PORT]   (prints "ready" once bound)
"""
import socket, struct, sys

COOKIE = 0x2112A442


def answer(req, src):
    if len(req) < 20 or struct.unpack("!H", req[:2])[0] != 0x0001:
        return None  # not a Binding Request: drop it
    txid = req[8:20]
    ip = struct.unpack("!I", socket.inet_aton(src[0]))[0]
    xor = struct.pack("!HHBBHI", 0x0020, 8, 0, 1, src[1] ^ (COOKIE >> 16), ip ^ COOKIE)
    plain = struct.pack("!HHBBHI", 0x0001, 8, 0, 1, src[1], ip)
    attrs = xor + plain
    return struct.pack("!HHI", 0x0101, len(attrs), COOKIE) + txid + attrs


def main():
    s = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)
    s.bind((sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 3478))
    print("ready", flush=True)
    while True:
        req, src = s.recvfrom(2048)
        resp = answer(req, src)
        if resp:
            s.sendto(resp, src)


if __name__ == "__main__":
    main()
