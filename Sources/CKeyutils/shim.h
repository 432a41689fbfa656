#ifndef KC_CKEYUTILS_SHIM_H
#define KC_CKEYUTILS_SHIM_H

// libkeyutils (Debian: libkeyutils-dev). Only Keyrings/Internals/Syscalls.swift imports this.
#include <keyutils.h>
#include <signal.h>
#include <sys/prctl.h>

// keyctl_search(), keyctl_read() and friends return `long`; the kernel's key ID
// constants are macros of type int that Swift imports fine. KEY_SPEC_* are negative
// ints and KEY_*_ALL are unsigned: nothing here needs a shim beyond the header.

// prctl is variadic, which Swift cannot call. A process that has read a key's payload
// makes itself undumpable: no core file, and no ptrace or /proc/PID/mem by other
// processes of its uid.
static inline int CKeyutils_disable_dumping(void) {
    return prctl(PR_SET_DUMPABLE, 0, 0, 0, 0);
}

// The signals the Swift runtime's backtracer catches to print a crash report, which
// includes the memory its registers point at: a value being read or written. Back to
// their default action, an undumpable process with a core limit of 0 dies and writes
// nothing. Returns 0, or -1 with errno.
static inline int CKeyutils_disable_crash_reports(void) {
    const int signals[] = { SIGSEGV, SIGBUS, SIGILL, SIGFPE, SIGABRT, SIGQUIT, SIGTRAP };
    for (unsigned i = 0; i < sizeof signals / sizeof signals[0]; i++) {
        if (signal(signals[i], SIG_DFL) == SIG_ERR) return -1;
    }
    return 0;
}

#endif
