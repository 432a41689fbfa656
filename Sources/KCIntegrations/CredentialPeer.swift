#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Who is asking `kc credential-server` for a credential: the process at the other end
/// of a connection, as the kernel saw it connect (SO_PEERCRED), which a peer cannot
/// forge. Only systemd's managers are served: the system manager (uid 0) and the
/// server's own user's manager (the server's uid).
public struct CredentialPeer: Equatable, Sendable {
    /// The peer's process when it connected.
    public var pid: Int32
    /// The peer's user when it connected: what ``isServed(byServerRunningAs:)`` decides on.
    public var uid: UInt32

    init(pid: Int32, uid: UInt32) {
        self.pid = pid
        self.uid = uid
    }

    /// The peer connected on `descriptor`, from getsockopt(SO_PEERCRED); nil if the
    /// kernel does not say.
    public init?(connection descriptor: Int32) {
        // struct ucred { pid_t pid; uid_t uid; gid_t gid; }
        var words: [UInt32] = [0, 0, 0]
        var length = socklen_t(MemoryLayout<UInt32>.size * 3)
        let status = words.withUnsafeMutableBytes { getsockopt(descriptor, SOL_SOCKET, SO_PEERCRED, $0.baseAddress, &length) }
        guard status == 0, length == socklen_t(MemoryLayout<UInt32>.size * 3) else { return nil }
        self.init(pid: Int32(bitPattern: words[0]), uid: words[1])
    }

    /// Whether a server running as `serverUID` answers this peer: uid 0, or its own uid.
    public func isServed(byServerRunningAs serverUID: UInt32) -> Bool {
        uid == 0 || uid == serverUID
    }

    /// Which uids a server running as `serverUID` serves, as a refusal says it:
    /// `uid 0 is` or `uid 0 and uid 1000 are`.
    public static func servedUIDs(byServerRunningAs serverUID: UInt32) -> String {
        "uid \(serverUID == 0 ? "0 is" : "0 and uid \(serverUID) are")"
    }
}
