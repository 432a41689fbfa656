#ifndef KC_CFRONT_SHIM_H
#define KC_CFRONT_SHIM_H

// The C that kc's front (Front/Front.swift) calls: libkeyutils and a few libc calls.
// Linked statically by Tools/build-front.sh; no Swift runtime beyond Embedded Swift's.
#include <errno.h>
#include <keyutils.h>
#include <limits.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/resource.h>
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

#endif
