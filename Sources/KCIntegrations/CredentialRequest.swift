import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What systemd asks `kc credential-server` for on one connection (`LoadCredential=ID:SOCKET`),
/// read from the address its client socket is bound to: the abstract name
/// `\0<hex random>/unit/<unit>/<credential id>`.
public struct CredentialRequest: Equatable, Sendable {
    /// The unit that will be given the credential, such as `web@1.service`.
    public var unit: String
    /// The credential's ID, which names the item to send.
    public var id: KeyName

    /// Parses the peer's `sun_path` (the bytes after the family, as long as getpeername
    /// says). Nil unless it has exactly that shape: abstract, 1 to 16 lowercase hex
    /// digits, `unit`, a valid unit name, and an ID that is a valid item name.
    init?(peerPath path: [UInt8]) {
        guard path.first == 0, !path.dropFirst().contains(0) else { return nil }
        let parts = path.dropFirst().split(separator: UInt8(ascii: "/"), omittingEmptySubsequences: false)
        guard parts.count == 4,
              (1...16).contains(parts[0].count),
              parts[0].allSatisfy({ (UInt8(ascii: "0")...UInt8(ascii: "9")).contains($0) || (UInt8(ascii: "a")...UInt8(ascii: "f")).contains($0) }),
              parts[1].elementsEqual("unit".utf8),
              Self.isUnitName(Array(parts[2]))
        else { return nil }
        let id = KeyName(bytes: parts[3])
        guard (try? validateName(id, as: .item)) != nil else { return nil }
        unit = String(decoding: parts[2], as: UTF8.self)
        self.id = id
    }

    /// The request of the peer connected on `descriptor` (an accepted AF_UNIX stream
    /// socket), from the address getpeername(2) reports; nil if it has none, or not
    /// systemd's shape.
    public init?(connection descriptor: Int32) {
        guard let path = Self.peerPath(of: descriptor) else { return nil }
        self.init(peerPath: path)
    }

    /// systemd's unit name rules: at most 255 bytes of `[A-Za-z0-9:_.\-@\\]`, a name
    /// before the type suffix, and a known type.
    public static func isUnitName(_ bytes: [UInt8]) -> Bool {
        guard (3...255).contains(bytes.count),
              bytes.allSatisfy({ byte in
                  (UInt8(ascii: "a")...UInt8(ascii: "z")).contains(byte) || (UInt8(ascii: "A")...UInt8(ascii: "Z")).contains(byte)
                      || (UInt8(ascii: "0")...UInt8(ascii: "9")).contains(byte) || Array(":_.-@\\".utf8).contains(byte)
              }),
              let dot = bytes.lastIndex(of: UInt8(ascii: ".")), dot > 0
        else { return false }
        let type = String(decoding: bytes[(dot + 1)...], as: UTF8.self)
        return ["service", "socket", "device", "mount", "automount", "swap", "target", "path", "timer", "slice", "scope"].contains(type)
    }

    /// The bytes of the peer's `sun_path`, as long as the kernel reports.
    private static func peerPath(of descriptor: Int32) -> [UInt8]? {
        var address = sockaddr_un()
        var length = socklen_t(MemoryLayout<sockaddr_un>.size)
        let status = withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { getpeername(descriptor, $0, &length) }
        }
        let pathOffset = MemoryLayout<sockaddr_un>.offset(of: \.sun_path) ?? 2
        guard status == 0, Int(length) > pathOffset, address.sun_family == sa_family_t(AF_UNIX) else { return nil }
        let count = min(Int(length) - pathOffset, MemoryLayout.size(ofValue: address.sun_path))
        return withUnsafeBytes(of: &address.sun_path) { Array($0.prefix(count)) }
    }
}
