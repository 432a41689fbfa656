import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

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

/// What a credential helper read on standard input.
enum HelperInput {
    case bytes([UInt8])
    case tooLong
    case unreadable
}

/// Reads a helper's standard input to its end, or with `stopAtBlankLine` to the first
/// empty line (git's protocol ends there), but never more than `limit` bytes: a client
/// sends a few short lines, so more is refused rather than held. The caller zeroes it.
func readHelperInput(limit: Int, stopAtBlankLine: Bool) -> HelperInput {
    let end: (([UInt8], Range<Int>) -> Int?)? = stopAtBlankLine ? { blankLineEnd(in: $0, $1) } : nil
    guard var bytes = readStandardInput(limit: limit, endsAt: end) else {
        return .unreadable
    }
    if bytes.count > limit {
        bytes.overwriteWithZeros()
        return .tooLong
    }
    return .bytes(bytes)
}

/// Where the bytes before the first empty line end (a line feed at the very start, or
/// one right after another, or after a carriage return that follows one), if one is in
/// `bytes[range]`.
private func blankLineEnd(in bytes: [UInt8], _ range: Range<Int>) -> Int? {
    let newline = UInt8(ascii: "\n"), carriageReturn = UInt8(ascii: "\r")
    for index in range where bytes[index] == newline {
        var start = index
        if start > 0 && bytes[start - 1] == carriageReturn { start -= 1 }
        if start == 0 || bytes[start - 1] == newline { return start }
    }
    return nil
}

/// Writes bytes to standard output, then zeroes them (they may hold a secret).
@discardableResult
func writeSecretOutput(_ bytes: inout [UInt8]) -> Bool {
    let written = bytes.withUnsafeBytes { writeAll(fd: 1, $0) }
    bytes.overwriteWithZeros()
    return written
}
