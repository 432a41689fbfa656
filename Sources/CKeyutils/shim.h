#ifndef KC_CKEYUTILS_SHIM_H
#define KC_CKEYUTILS_SHIM_H

// libkeyutils (Debian: libkeyutils-dev). Only Keyrings/Internals/Syscalls.swift imports this.
#include <keyutils.h>
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

#endif
