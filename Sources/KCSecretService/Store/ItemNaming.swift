import Keyrings

/// Which kc item (service and name) a new Secret Service item is kept in, chosen from its
/// attributes so that a person finds it with `kc ls` and `kc get` (README, "The Secret
/// Service"):
///
/// 1. A `service` attribute (python keyring, many programs, `secret-tool store service
///    S username U`): service S, item the `username` (else `user`, `account`, the label).
/// 2. Else a `server` attribute (libsecret's network schema, as git's
///    `git-credential-libsecret` uses it): service `PROTOCOL:SERVER[:PORT][%2FOBJECT]`,
///    item the `user` (else `username`, the label).
/// 3. Else the `xdg:schema` (Chromium's `chrome_libsecret_password_schema`), or
///    `secret-service`: item the label.
///
/// A `/` in a part becomes `%2F` and a `%` `%25`, as kc's git helper writes paths; a name
/// longer than kc allows (255 bytes) is cut. Taken names get ` (2)`, ` (3)`, … (see
/// ``SecretStore``). A service the user shares with a group is never used for a new
/// item: ``unshared(_:_:)`` names its own.
enum ItemNaming {
    static func proposed(attributes: [String: String], label: String) -> ItemID {
        let service: String
        let name: String?
        if let named = nonEmpty(attributes["service"]) {
            service = named
            name = nonEmpty(attributes["username"]) ?? nonEmpty(attributes["user"]) ?? nonEmpty(attributes["account"])
        } else if let server = nonEmpty(attributes["server"]) {
            var parts = [server]
            if let scheme = nonEmpty(attributes["protocol"]) { parts.insert(scheme, at: 0) }
            if let port = nonEmpty(attributes["port"]), port != "0" { parts.append(port) }
            var joined = parts.joined(separator: ":")
            if let object = nonEmpty(attributes["object"]) { joined += "/" + object }
            service = joined
            name = nonEmpty(attributes["user"]) ?? nonEmpty(attributes["username"])
        } else {
            service = nonEmpty(attributes["xdg:schema"]) ?? "secret-service"
            name = nil
        }
        return ItemID(service: component(service, fallback: "secret-service"),
                      name: component(name ?? label, fallback: "secret"))
    }

    /// The service a new item goes into instead of `service` when the user shares that
    /// one with a group (a member would read the client's secret there):
    /// `SERVICE (not shared)`, then `SERVICE (not shared 2)`, …, cut so the whole stays
    /// within 255 bytes. A person finds it next to the shared one in `kc ls`.
    static func unshared(_ service: KeyName, _ n: Int) -> KeyName {
        let suffix = Array((n == 1 ? " (not shared)" : " (not shared \(n))").utf8)
        return KeyName(bytes: cut(service.bytes, to: 255 - suffix.count) + suffix)
    }

    /// `name (n)`: the n-th try at a free name, cut so the whole stays within 255 bytes.
    static func numbered(_ name: KeyName, _ n: Int) -> KeyName {
        let suffix = Array(" (\(n))".utf8)
        return KeyName(bytes: cut(name.bytes, to: 255 - suffix.count) + suffix)
    }

    private static func nonEmpty(_ text: String?) -> String? {
        guard let text, !text.isEmpty else { return nil }
        return text
    }

    /// `text` as a kc name: `%` and `/` escaped, `.` and `..` escaped, cut to 255 bytes.
    static func component(_ text: String, fallback: String) -> KeyName {
        var bytes: [UInt8] = []
        for byte in text.utf8 {
            switch byte {
            case UInt8(ascii: "/"): bytes += Array("%2F".utf8)
            case UInt8(ascii: "%"): bytes += Array("%25".utf8)
            default: bytes.append(byte)
            }
        }
        if bytes == [UInt8(ascii: ".")] || bytes == [UInt8(ascii: "."), UInt8(ascii: ".")] {
            bytes = bytes.flatMap { _ in Array("%2E".utf8) }
        }
        if bytes.isEmpty { bytes = Array(fallback.utf8) }
        return KeyName(bytes: cut(bytes, to: 255))
    }

    /// The first `limit` bytes or fewer, not splitting a UTF-8 sequence.
    private static func cut(_ bytes: [UInt8], to limit: Int) -> [UInt8] {
        guard bytes.count > limit else { return bytes }
        var end = limit
        while end > 0, bytes[end] & 0xC0 == 0x80 { end -= 1 }
        return Array(bytes[..<end])
    }
}
