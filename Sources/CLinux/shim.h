#ifndef KC_CLINUX_SHIM_H
#define KC_CLINUX_SHIM_H

// Linux system calls that glibc does not wrap. Only KernelKeychain's
// Persistence/Vault/OpenBeneath.swift imports this.
#include <linux/openat2.h>
#include <sys/syscall.h>
#include <unistd.h>

// openat2(2) (Linux 5.6) has no wrapper in glibc 2.36 (Debian 12), and syscall(2) is
// variadic, which Swift cannot call. Returns the new descriptor, or -1 with errno set
// (ENOSYS on an older kernel or under a seccomp filter that does not know it).
static inline int CLinux_openat2(int directory, const char *path, int flags, unsigned int mode,
                                 unsigned long long resolve) {
    struct open_how how = {
        .flags = (unsigned long long)(unsigned int)flags,
        .mode = mode,
        .resolve = resolve,
    };
    return (int)syscall(SYS_openat2, directory, path, &how, sizeof how);
}

#endif
