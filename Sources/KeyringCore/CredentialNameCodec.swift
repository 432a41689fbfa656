/// How the credential helpers (git-credential-kc, docker-credential-kc) turn URLs and
/// user names into service and item names, exactly and reversibly.
///
/// A name cannot hold `/` (DESIGN §3) and URLs are full of them, so a part is written
/// with `%` escapes, as in a URL: `%` becomes `%25`, `/` becomes `%2F`, and a name that
/// would be `.` or `..` writes its dots as `%2E`. Nothing else changes, so the names stay
/// readable (`docker:127.0.0.1:5000`, `git:https:example.com`). Every `%` in an encoded
/// part starts one of these escapes, so a name with `%` followed by anything else (such
/// as git's `%latest`) can never be taken for an encoded part.
public enum CredentialNameCodec {
    /// Appends `part` with `%`, `/` (and, `escapingColon`, `:`) as `%XX` escapes.
    public static func appendEncoded(_ part: some Sequence<UInt8>, escapingColon: Bool = false, to name: inout [UInt8]) {
        for byte in part {
            if byte == UInt8(ascii: "%") || byte == UInt8(ascii: "/") || (escapingColon && byte == UInt8(ascii: ":")) {
                appendEscape(byte, to: &name)
            } else {
                name.append(byte)
            }
        }
    }

    /// A whole item name for `part`: the part encoded, and `.` or `..` as `%2E` or
    /// `%2E%2E`. Nil for an empty part or one too long for a name.
    public static func item(_ part: some Sequence<UInt8>) -> [UInt8]? {
        var encoded: [UInt8] = []
        appendEncoded(part, to: &encoded)
        if encoded == [UInt8(ascii: ".")] || encoded == [UInt8(ascii: "."), UInt8(ascii: ".")] {
            let dots = encoded.count
            encoded = []
            for _ in 0..<dots { appendEscape(UInt8(ascii: "."), to: &encoded) }
        }
        return encoded.count >= 1 && encoded.count <= NameRules.maximumLength ? encoded : nil
    }

    /// The part an encoded name stands for; nil if `name` holds a `%` that does not start
    /// one of the escapes above (one of the helpers' own records, not an encoded part).
    public static func decode(_ name: some Collection<UInt8>) -> [UInt8]? {
        var decoded: [UInt8] = []
        var iterator = name.makeIterator()
        while let byte = iterator.next() {
            guard byte == UInt8(ascii: "%") else {
                decoded.append(byte)
                continue
            }
            guard let highDigit = iterator.next(), let lowDigit = iterator.next(),
                  let high = upperHexValue(highDigit), let low = upperHexValue(lowDigit) else { return nil }
            let escaped = high << 4 | low
            guard escaped == UInt8(ascii: "%") || escaped == UInt8(ascii: "/") || escaped == UInt8(ascii: ":")
                    || escaped == UInt8(ascii: ".") else { return nil }
            decoded.append(escaped)
        }
        return decoded
    }

    private static func appendEscape(_ byte: UInt8, to name: inout [UInt8]) {
        let digits = staticBytes("0123456789ABCDEF")
        name.append(contentsOf: [UInt8(ascii: "%"), digits[Int(byte >> 4)], digits[Int(byte & 0x0F)]])
    }

    /// Escapes are written in upper case, and only those are read back.
    private static func upperHexValue(_ digit: UInt8) -> UInt8? {
        switch digit {
        case UInt8(ascii: "0")...UInt8(ascii: "9"): return digit - UInt8(ascii: "0")
        case UInt8(ascii: "A")...UInt8(ascii: "F"): return digit - UInt8(ascii: "A") + 10
        default: return nil
        }
    }
}
