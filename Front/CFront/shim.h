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
// to read instead when the front hands a `kc set` over after reading it (memfd_create(2):
// a GNU extension these includes do not declare without _GNU_SOURCE). Close-on-exec;
// dup2 onto 0 makes the copy the full kc reads. Returns the descriptor, or -1 with errno.
static inline int CFront_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}

// open(2) for reading, close-on-exec (open is variadic, which Swift cannot call), as the
// full kc opens the files it reads whole: /etc/group with O_NOFOLLOW (`readProcBytes`),
// /etc/nsswitch.conf as the C library does (following a link). Front/Shared.swift.
static inline int CFront_open_read(const char *path, int followLinks) {
    return open(path, O_RDONLY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW));
}

#endif
