internal import CFuse3
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// Why a mount could not start. libfuse has usually printed its own reason too.
public struct MountError: Error, CustomStringConvertible, Sendable {
    public var description: String
}

/// A FUSE session serving a ``KeychainFilesystem``: mount, serve on several threads
/// until unmounted or signalled (SIGINT, SIGTERM, SIGHUP), then clean up.
public enum KeychainMount {
    /// Mounts at `mountpoint` and serves until the mount ends. `onMounted` runs once the
    /// kernel has the mount (requests made from then on wait for the loop, never fail).
    ///
    /// The daemon keeps no secret between requests and is not dumpable, so a core file
    /// or ptrace by another process of the uid cannot read its memory.
    public static func serve(
        filesystem: KeychainFilesystem, at mountpoint: String, allowOther: Bool,
        onMounted: () -> Void
    ) throws(MountError) {
        _ = CFuse3_disable_dumping()
        try? disableCrashReports()

        // Without allow_other the kernel lets only the mounting uid reach the daemon, so
        // checking mode bits as well (default_permissions) only costs a GETATTR of every
        // path component on every open. With allow_other the kernel must check them.
        var options = "fsname=kc,subtype=kc"
        if filesystem.configuration.readOnly { options += ",ro" }
        if allowOther { options += ",allow_other,default_permissions" }
        let argumentStrings: [UnsafeMutablePointer<CChar>?] = ["kc", "-o", options].map { (text: String) in strdup(text) }
        defer { argumentStrings.forEach { free($0) } }
        var argumentVector = argumentStrings
        let bridge = FuseBridge(filesystem: filesystem)
        let userdata = Unmanaged.passRetained(bridge)
        defer { userdata.release() }

        var operations = keychainOperations()
        let session = argumentVector.withUnsafeMutableBufferPointer { vector -> OpaquePointer? in
            var arguments = CFuse3_args_init(Int32(vector.count), vector.baseAddress)
            defer { fuse_opt_free_args(&arguments) }
            return fuse_session_new(&arguments, &operations, MemoryLayout<fuse_lowlevel_ops>.size, userdata.toOpaque())
        }
        guard let session else { throw MountError(description: "cannot start a FUSE session (options: \(options))") }
        defer { fuse_session_destroy(session) }
        guard fuse_set_signal_handlers(session) == 0 else { throw MountError(description: "cannot install signal handlers") }
        defer { fuse_remove_signal_handlers(session) }
        // Resolved before the mount: afterwards resolving it would ask this filesystem.
        let resolved = realpath(mountpoint, nil).map { path in defer { free(path) }; return String(cString: path) } ?? mountpoint
        guard fuse_session_mount(session, mountpoint) == 0 else {
            throw MountError(description: "cannot mount at \(mountpoint)" + (allowOther && getuid() != 0
                ? "; --allow-other needs 'user_allow_other' in /etc/fuse.conf" : "; is /dev/fuse usable ('kc doctor')?"))
        }
        defer { fuse_session_unmount(session) }
        let ids = OwnMounts.ids(at: resolved)
        bridge.mountIDs.withLock { $0 = ids }
        onMounted()
        _ = CFuse3_session_loop_mt(session, 10)
    }
}
