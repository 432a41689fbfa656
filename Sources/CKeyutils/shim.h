#ifndef KC_CKEYUTILS_SHIM_H
#define KC_CKEYUTILS_SHIM_H

// libkeyutils (Debian: libkeyutils-dev). Only Keyrings/Internals/Syscalls.swift imports this.
#include <keyutils.h>

// keyctl_search(), keyctl_read() and friends return `long`; the kernel's key ID
// constants are macros of type int that Swift imports fine. KEY_SPEC_* are negative
// ints and KEY_*_ALL are unsigned: nothing here needs a shim beyond the header.

#endif
