#!/usr/bin/env python3
"""A FUSE filesystem that never answers: what any local user can mount over a folder of
their own (~/.local/share, where kc's vault lives) to leave a process that looks inside
stuck in the kernel. It answers the kernel's INIT, then reads every request and answers
none. A request the daemon has read cannot be interrupted, not even by SIGKILL: the
process waits until the daemon answers or ends (or the mount is aborted).

    unanswering_fuse.py MOUNTPOINT     mounts (fusermount3, no root needed), prints
                                       "ready", and waits until killed; the mount goes
                                       with it (fusermount3 -u -z, or killing it)

The tests use it to prove that a login never waits on a kc stuck this way (pam_kc).
"""
import os
import signal
import socket
import struct
import subprocess
import sys


def mount(mountpoint):
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    env = dict(os.environ, _FUSE_COMMFD=str(theirs.fileno()))
    subprocess.run(["fusermount3", "-o", "fsname=unanswering,subtype=unanswering", "--", mountpoint],
                   env=env, pass_fds=[theirs.fileno()], check=True)
    theirs.close()
    _, ancillary, _, _ = ours.recvmsg(1, socket.CMSG_LEN(4))
    for level, kind, data in ancillary:
        if level == socket.SOL_SOCKET and kind == socket.SCM_RIGHTS:
            return struct.unpack("i", data[:4])[0]
    sys.exit("unanswering_fuse: fusermount3 passed no /dev/fuse descriptor")


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    fd = mount(sys.argv[1])
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(0))
    buffer_size = 1 << 20
    answered_init = False
    while True:
        request = os.read(fd, buffer_size)
        _, opcode, unique = struct.unpack_from("<IIQ", request)
        if opcode == 26 and not answered_init:  # FUSE_INIT: protocol 7.31, nothing more
            body = struct.pack("<IIIIHHIIHHI28x", 7, 31, 0, 0, 1, 1, 4096, 1, 1, 0, 0)
            os.write(fd, struct.pack("<IiQ", 16 + len(body), 0, unique) + body)
            answered_init = True
            print("ready", flush=True)
        # Every other request is read and left unanswered.


if __name__ == "__main__":
    main()
