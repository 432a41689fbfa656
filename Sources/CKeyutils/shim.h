#ifndef KC_CKEYUTILS_SHIM_H
#define KC_CKEYUTILS_SHIM_H

// libkeyutils (Debian: libkeyutils-dev) and the few libc calls Swift cannot make itself,
// for the keyring core (Sources/KeyringCore), the full kc's Keyrings and the front
// (Front/, compiled with the core by Tools/build-front.sh in Embedded Swift, which has no
// Glibc module: so the libc headers the core uses are included here).
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

// errno is a macro over a thread-local, which Swift cannot read.
static inline int CKeyutils_errno(void) {
    return errno;
}

// open(2) of a path with O_PATH | O_NOFOLLOW | O_CLOEXEC, as the full kc opens the vault's
// folder to tell whether it exists: O_PATH is a GNU extension that this header's
// includes do not define without _GNU_SOURCE. Returns the descriptor, or -1 with errno.
#ifndef O_PATH
#define O_PATH 010000000
#endif
static inline int CKeyutils_open_path(const char *path) {
    return open(path, O_PATH | O_NOFOLLOW | O_CLOEXEC);
}

// A memory file holding the value the front read from standard input, for the full kc
// to read instead when the front hands a `kc set` or a helper's get over after reading it (memfd_create(2):
// a GNU extension these includes do not declare without _GNU_SOURCE). Close-on-exec;
// dup2 onto 0 makes the copy the full kc reads. Returns the descriptor, or -1 with errno.
static inline int CKeyutils_memfd(const char *name) {
    return (int)syscall(SYS_memfd_create, name, 1U /* MFD_CLOEXEC */);
}

// SIGXFSZ ignored while the memory file is written (SIG_IGN is a cast Swift cannot
// import), its disposition kept in `old` to be given back before the full kc runs.
static inline int CKeyutils_ignore_file_size_signal(struct sigaction *old) {
    struct sigaction ignore;
    memset(&ignore, 0, sizeof ignore);
    ignore.sa_handler = SIG_IGN;
    sigemptyset(&ignore.sa_mask);
    return sigaction(SIGXFSZ, &ignore, old);
}

static inline int CKeyutils_restore_file_size_signal(const struct sigaction *old) {
    return sigaction(SIGXFSZ, old, NULL);
}

// A pipe for the same (first choice: no file size limit or seccomp filter that lets the
// full kc run refuses a pipe): pipe2 with O_CLOEXEC (a GNU extension these includes do
// not declare), into fds. Returns 0, or -1 with errno.
static inline int CKeyutils_pipe(int fds[2]) {
    return (int)syscall(SYS_pipe2, fds, O_CLOEXEC);
}

// The pipe's capacity, raised to at least `wanted` bytes where the kernel allows
// (fcntl is variadic, which Swift cannot call; F_SETPIPE_SZ is a GNU extension).
// Returns the capacity, or -1 with errno.
static inline int CKeyutils_pipe_capacity(int fd, int wanted) {
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
static inline int CKeyutils_open_read(const char *path, int followLinks) {
    return open(path, O_RDONLY | O_CLOEXEC | (followLinks ? 0 : O_NOFOLLOW));
}

// A signal back to its default action (SIG_DFL is a cast Swift cannot import), as the
// full kc's `kc exec` starts its command with the signals it forwards; 0, or -1 with errno.
static inline int CKeyutils_default_signal(int signal_number) {
    return signal(signal_number, SIG_DFL) == SIG_ERR ? -1 : 0;
}

#endif
