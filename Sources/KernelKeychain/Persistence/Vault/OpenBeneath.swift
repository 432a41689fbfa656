internal import CLinux

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `O_PATH` from <fcntl.h>, hidden behind _GNU_SOURCE: a descriptor that names a file
/// without opening it (no request reaches a FUSE daemon). The same value on every
/// architecture kc builds for (x86_64, aarch64).
internal let O_PATH: Int32 = 0o10000000

/// Opens `relative` (a path with no leading `/`) under the folder `directory` is open
/// on, as `openat(2)` with `O_NOFOLLOW | O_CLOEXEC` would, except that the walk never
/// leaves the mount `directory` is on: it refuses with EXDEV a mount point anywhere on
/// the way, the last name included, before it looks inside it; and with ELOOP any
/// symbolic link (the vault holds none: kc refuses them).
///
/// Why: root's boot load reads every user's vault, and a user can mount a filesystem
/// of theirs in their vault folder (a FUSE mount whose daemon is stopped makes every
/// call that reaches it wait for ever; `stat` of the mount point is one of them). The
/// kernel checks the mount on the walk itself (`openat2(2)`, `RESOLVE_NO_XDEV`), so
/// nothing can be mounted between a check and the open, and a mount point is refused
/// from the folder above it, without a request to its filesystem. Comparing `st_dev`
/// with `fstatat` would ask that filesystem (and wait), and catch no bind mount.
///
/// On a kernel before 5.6, or under a seccomp filter that does not allow openat2
/// (ENOSYS or EPERM), it falls back to a plain `openat` that does not look at mounts:
/// there the boot load's deadline is what stops a filesystem that does not answer.
/// The corresponding C function is `openat2(2)` with `RESOLVE_NO_XDEV`,
/// `RESOLVE_NO_SYMLINKS` and `RESOLVE_BENEATH`.
internal func openBeneath(_ directory: Int32, _ relative: [UInt8], flags: Int32, mode: mode_t = 0) -> Int32 {
    let terminated = relative.map { CChar(bitPattern: $0) } + [0]
    let allFlags = flags | O_NOFOLLOW | O_CLOEXEC
    // openat2 refuses a mode without O_CREAT (EINVAL).
    let createMode = flags & O_CREAT != 0 ? UInt32(mode) : 0
    let resolve = UInt64(RESOLVE_NO_XDEV | RESOLVE_NO_SYMLINKS | RESOLVE_BENEATH)
    while true {
        let fd = CLinux_openat2(directory, terminated, allFlags, createMode, resolve)
        if fd >= 0 { return fd }
        if errno == EINTR { continue }
        guard errno == ENOSYS || errno == EPERM else { return -1 }
        let plain = openat(directory, terminated, allFlags, mode)
        if plain < 0 && errno == EINTR { continue }
        return plain
    }
}
