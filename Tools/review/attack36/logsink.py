#!/usr/bin/env python3
# A datagram socket that stands in for /dev/log inside a private mount namespace:
# every message it gets is appended, as received (bytes escaped with repr), to FILE.
import os, socket, sys
path, out = sys.argv[1], sys.argv[2]
try: os.unlink(path)
except FileNotFoundError: pass
s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
s.bind(path); os.chmod(path, 0o666)
with open(out, "ab", buffering=0) as f:
    while True:
        data = s.recv(65536)
        f.write(repr(data)[2:-1].encode() + b"\n")
