#ifndef KC_CFRONT_HELPERS_H
#define KC_CFRONT_HELPERS_H

// The C that the front's credential helpers (Front/CredentialHelpers.swift) call besides
// shim.h's.
#include <fcntl.h>
#include <sys/syscall.h>
#include <unistd.h>

// memfd_create(2) is declared only with _GNU_SOURCE, and syscall(2) is variadic, which
// Swift cannot call. An anonymous file in memory (never on a disk) with close-on-exec,
// for the input the front read and hands to the full kc. Returns it, or -1 with errno.
#ifndef MFD_CLOEXEC
#define MFD_CLOEXEC 0x0001U
#endif
static inline int CFront_memfd_create(const char *name) {
    return (int)syscall(SYS_memfd_create, name, MFD_CLOEXEC);
}

// open(2) is variadic, which Swift cannot call. Opens `path` to read, as the full kc opens
// /proc/keys (O_RDONLY | O_NOFOLLOW | O_CLOEXEC). Returns the descriptor, or -1 with errno.
static inline int CFront_open_reading(const char *path) {
    return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

#endif
