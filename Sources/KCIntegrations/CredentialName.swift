import Keyrings

/// How the credential helpers (git-credential-kc, docker-credential-kc) turn URLs and
/// user names into service and item names, exactly and reversibly.
///
/// A name cannot hold `/` (DESIGN §3) and URLs are full of them, so a part is written
/// with `%` escapes, as in a URL: `%` becomes `%25`, `/` becomes `%2F`, and a name that
/// would be `.` or `..` writes its dots as `%2E`. Nothing else changes, so the names stay
/// readable (`docker:127.0.0.1:5000`, `git:https:example.com`). Every `%` in an encoded
/// part starts one of these escapes, so a name with `%` followed by anything else (such
/// as git's `%latest`) can never be taken for an encoded part.
enum CredentialName {
    /// `part` with `%`, `/` (and each byte of `alsoEscaping`) as `%XX` escapes.
    static func encode(_ part: some Collection<UInt8>, alsoEscaping extra: [UInt8] = []) -> [UInt8] {
        var encoded: [UInt8] = []
        encoded.reserveCapacity(part.count)
        for byte in part {
            if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "/") || extra.contains(byte) {
                encoded += escape(byte)
            } else {
                encoded.append(byte)
            }
        }
        return encoded
    }

    /// A whole item name for `part`: ``encode(_:alsoEscaping:)``, and `.` or `..` as
    /// `%2E` or `%2E%2E`. Nil for an empty part or one too long for a name.
    static func item(_ part: some Collection<UInt8>) -> KeyName? {
        var encoded = encode(part)
        if encoded == [UInt8(ascii: ".")] || encoded == [UInt8(ascii: "."), UInt8(ascii: ".")] {
            encoded = encoded.flatMap { _ in escape(UInt8(ascii: ".")) }
        }
        guard (1...255).contains(encoded.count) else { return nil }
        return KeyName(bytes: encoded)
    }

    /// The part an encoded name stands for; nil if `name` holds a `%` that does not
    /// start one of ``encode(_:alsoEscaping:)``'s escapes (one of the helpers' own
    /// records, not an encoded part).
    static func decode(_ name: some Collection<UInt8>) -> [UInt8]? {
        let bytes = Array(name)
        var decoded: [UInt8] = []
        var index = 0
        while index < bytes.count {
            guard bytes[index] == UInt8(ascii: "%") else {
                decoded.append(bytes[index])
                index += 1
                continue
            }
            guard index + 2 < bytes.count, let high = hexValue(bytes[index + 1]), let low = hexValue(bytes[index + 2]),
                  [UInt8(ascii: "%"), UInt8(ascii: "/"), UInt8(ascii: ":"), UInt8(ascii: ".")].contains(high << 4 | low)
            else { return nil }
            decoded.append(high << 4 | low)
            index += 3
        }
        return decoded
    }

    private static func escape(_ byte: UInt8) -> [UInt8] {
        let digits = Array("0123456789ABCDEF".utf8)
        return [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]]
    }

    private static func hexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): digit - UInt8(ascii: "A") + 10
        default: nil
        }
    }
}
