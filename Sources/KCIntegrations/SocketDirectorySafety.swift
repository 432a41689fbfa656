#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Whether a directory is a safe home for `kc credential-server`'s socket. Whoever may
/// rename entries in the socket's directory, or in one above it, may swap the socket for
/// their own, and every unit would then load that impostor's values; so each directory
/// from the socket's up to `/` must be changeable only by this uid and root. A sticky
/// directory that others may write (`/tmp`) is safe above the socket's, whose name they
/// cannot take once it is this uid's, but not as the socket's own: there another user
/// may bind the socket's name first (before a start, after a stop or a reboot).
public enum SocketDirectorySafety {
    /// The first directory, from `directory` up to `/`, both as written and with
    /// symbolic links resolved, whose entries someone else may change, and why
    /// (``problem(with:)``); nil if there is none.
    public static func unsafeDirectory(holding directory: String) -> (directory: String, problem: String)? {
        var candidates: [(path: String, holdsSocket: Bool)] = []
        func addAncestors(of start: String) {
            var current = start
            while true {
                candidates.append((current, current == start))
                guard current != "/", let slash = current.lastIndex(of: "/") else { break }
                current = slash == current.startIndex ? "/" : String(current[..<slash])
            }
        }
        addAncestors(of: directory)
        if let resolved = realpath(directory, nil) {
            addAncestors(of: String(cString: resolved))
            free(resolved)
        }
        for candidate in candidates {
            if let problem = problem(with: candidate.path, holdsSocket: candidate.holdsSocket) { return (candidate.path, problem) }
        }
        return nil
    }

    /// Why a directory is unsafe on the socket's way (`belongs to uid 1001`, `is writable
    /// by its group or by others` when it is not sticky either), or nil if only this uid
    /// and root can change its entries. With `holdsSocket` (the socket's own directory)
    /// a sticky one that others may write is unsafe too: they may take the socket's name
    /// first. The checks are stat(2)'s owner and mode.
    public static func problem(with directory: String, holdsSocket: Bool = false) -> String? {
        var info = stat()
        guard stat(directory, &info) == 0 else { return "cannot be examined (\(String(cString: strerror(errno))))" }
        if info.st_uid != getuid() && info.st_uid != 0 { return "belongs to uid \(info.st_uid)" }
        guard info.st_mode & 0o022 != 0 else { return nil }
        if info.st_mode & S_ISVTX == 0 { return "is writable by its group or by others" }
        if holdsSocket { return "is shared (writable by others, sticky): another user may bind the socket's name first" }
        return nil
    }
}
