#ifndef KC_CFRONT_SHIM_H
#define KC_CFRONT_SHIM_H

// The C that kc's front (Front/Front.swift) calls: libkeyutils and a few libc calls.
// Linked statically by Tools/build-front.sh; no Swift runtime beyond Embedded Swift's.
#include <errno.h>
#include <fcntl.h>
#include <keyutils.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

// errno is a macro over a thread-local, which Swift cannot read.
static inline int CFront_errno(void) {
    return errno;
}

// prctl is variadic, which Swift cannot call. Makes the process undumpable, as the full
// kc does before it reads a value (Sources/kc/CoreDumps.swift).
static inline int CFront_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

// open(2) of a path with O_PATH | O_NOFOLLOW | O_CLOEXEC, as the full kc opens the vault's
// folder to tell whether it exists: O_PATH is a GNU extension that this header's
// includes do not define without _GNU_SOURCE. Returns the descriptor, or -1 with errno.
#ifndef O_PATH
#define O_PATH 010000000
#endif
static inline int CFront_open_path(const char *path) {
    return open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

// A memory file holding the value the front read from standard input, for the full kc
// to read instead when the front hands a `kc set` or a helper's get over after reading it (memfd_create(2):
// a GNU extension these includes do not declare without _GNU_SOURCE). Close-on-exec;
// dup2 onto 0 makes the copy the full kc reads. Returns the descriptor, or -1 with errno.
static inline int CFront_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}

// SIGXFSZ ignored while the memory file is written (SIG_IGN is a cast Swift cannot
// import), its disposition kept in `old` to be given back before the full kc runs.
static inline int CFront_ignore_file_size_signal(struct sigaction *old) {
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    return sigaction(SIGXFSZ, &ignore, old);
}

static inline int CFront_restore_file_size_signal(const struct sigaction *old) {
    return sigaction(SIGXFSZ, old, NULL);
}

// A pipe for the same (first choice: no file size limit or seccomp filter that lets the
// full kc run refuses a pipe): pipe2 with O_CLOEXEC (a GNU extension these includes do
// not declare), into fds. Returns 0, or -1 with errno.
static inline int CFront_pipe(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}

// The pipe's capacity, raised to at least `wanted` bytes where the kernel allows
// (fcntl is variadic, which Swift cannot call; F_SETPIPE_SZ is a GNU extension).
// Returns the capacity, or -1 with errno.
static inline int CFront_pipe_capacity(int fd, int wanted) {
    int capacity = fcntl(fd, 1032 /* F_GETPIPE_SZ */);
    if (capacity >= 0 && capacity < wanted) {
        int raised = fcntl(fd, 1031 /* F_SETPIPE_SZ */, wanted);
        if (raised >= 0) capacity = raised;
    }
    return capacity;
}

// open(2) for reading, close-on-exec (open is variadic, which Swift cannot call), as the
// full kc opens the files it reads whole: /etc/group and /proc/keys with O_NOFOLLOW
// (`readProcBytes`), /etc/nsswitch.conf as the C library does (following a link).
static inline int CFront_open_read(const char *path, int followLinks) {
    return open(path, O_RDONLY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW));
}

#endif
