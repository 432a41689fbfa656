#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Sends one datagram on a new AF_UNIX socket to `address`: a path, or an abstract
/// name written with a leading `@` (as systemd writes `$NOTIFY_SOCKET`). False if the
/// address is too long or the send fails. `waiting: false` never blocks: a reader
/// that stopped reading (a full socket buffer) loses the datagram instead of stopping
/// the sender (a daemon's audit line must not hang the daemon).
package func sendDatagram(_ bytes: [UInt8], to address: String, waiting: Bool = true) -> Bool {
    guard var socketAddress = UnixSocketAddress(address) else { return false }
    let fd = socket(AF_UNIX, Int32(SOCK_DGRAM.rawValue) | Int32(SOCK_CLOEXEC.rawValue), 0)
    guard fd >= 0 else { return false }
    defer { close(fd) }
    let sent = socketAddress.withSockaddr { address, length in
        bytes.withUnsafeBytes { sendto(fd, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL) | (waiting ? 0 : Int32(MSG_DONTWAIT)), address, length) }
    }
    return sent == bytes.count
}

/// A `sockaddr_un` for a path, or for an abstract name given as `@name` (the `@`
/// stands for the leading NUL byte).
package struct UnixSocketAddress {
    private var storage = sockaddr_un()
    private var length: socklen_t

    package init?(_ address: String) {
        var bytes = Array(address.utf8)
        let abstract = bytes.first == UInt8(ascii: "@")
        if abstract { bytes[0] = 0 }
        guard !bytes.isEmpty else { return nil }
        self.init(rawPath: bytes, terminated: !abstract)
    }

    /// The address with `sun_path` exactly `rawPath` (a leading 0 makes it abstract);
    /// `terminated` adds the NUL a filesystem path ends with.
    package init?(rawPath: [UInt8], terminated: Bool) {
        storage.sun_family = sa_family_t(AF_UNIX)
        let capacity = MemoryLayout.size(ofValue: storage.sun_path)
        guard rawPath.count + (terminated ? 1 : 0) <= capacity else { return nil }
        withUnsafeMutableBytes(of: &storage.sun_path) { path in
            for (index, byte) in rawPath.enumerated() { path[index] = byte }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        length = socklen_t(pathOffset + rawPath.count + (terminated ? 1 : 0))
    }

    package mutating func withSockaddr<R>(_ body: (UnsafePointer<sockaddr>, socklen_t) -> R) -> R {
        let length = self.length
        return withUnsafePointer(to: &storage) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { body($0, length) }
        }
    }
}
