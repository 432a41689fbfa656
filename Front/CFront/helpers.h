#ifndef KC_CFRONT_HELPERS_H
#define KC_CFRONT_HELPERS_H

// The C that the front's credential helpers (Front/CredentialHelpers.swift) call besides
// shim.h's.
#include <fcntl.h>
#include <unistd.h>

// open(2) is variadic, which Swift cannot call. Opens `path` to read, as the full kc opens
// /proc/keys (O_RDONLY | O_NOFOLLOW | O_CLOEXEC). Returns the descriptor, or -1 with errno.
static inline int CFront_open_reading(const char *path) {
    return open(path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC);
}

#endif
