/// A JSON string written from bytes, as both programs write one (the docker credential
/// helper's answer; the full kc's `StrictJSON`).
public enum JSONString {
    /// Appends `bytes` as a JSON string: `"`, `\`, line feed, carriage return and tab
    /// escaped by name, other controls and DEL as `\u00XX`, the rest as they are. False,
    /// appending nothing, if the bytes are not UTF-8.
    @discardableResult
    public static func append(_ bytes: UnsafeRawBufferPointer, to output: inout [UInt8]) -> Bool {
        guard NameRules.isUTF8(bytes) else { return false }
        let hex = staticBytes("0123456789abcdef")
        let backslash = UInt8(ascii: "\\")
        output.append(UInt8(ascii: "\""))
        for byte in bytes {
            switch byte {
            case UInt8(ascii: "\""): output.append(contentsOf: [backslash, UInt8(ascii: "\"")])
            case backslash: output.append(contentsOf: [backslash, backslash])
            case UInt8(ascii: "\n"): output.append(contentsOf: [backslash, UInt8(ascii: "n")])
            case UInt8(ascii: "\r"): output.append(contentsOf: [backslash, UInt8(ascii: "r")])
            case UInt8(ascii: "\t"): output.append(contentsOf: [backslash, UInt8(ascii: "t")])
            case 0..<0x20, 0x7F:
                output.append(contentsOf: [backslash, UInt8(ascii: "u"), UInt8(ascii: "0"), UInt8(ascii: "0"),
                                           hex[Int(byte >> 4)], hex[Int(byte & 0x0F)]])
            default: output.append(byte)
            }
        }
        output.append(UInt8(ascii: "\""))
        return true
    }
}

/// How `docker-credential-kc` names a registry's service: `docker:` and the server URL
/// encoded (``CredentialNameCodec``). Both programs' rule.
public enum DockerCredentialNames {
    public static let servicePrefix: StaticString = "docker:"

    /// The service of `server`, or nil if the name would be too long or hold a NUL.
    public static func service(server: some Sequence<UInt8>) -> [UInt8]? {
        var name: [UInt8] = Array(staticBytes(servicePrefix))
        CredentialNameCodec.appendEncoded(server, to: &name)
        return name.count <= NameRules.maximumLength && !name.contains(0) ? name : nil
    }

    /// Where the server URL a client sent is in `input`: without the white space around
    /// it (the reference helpers trim it on `get` and `erase`); nil if there is none.
    public static func serverRange(in input: UnsafeRawBufferPointer) -> Range<Int>? {
        let isSpace = { (byte: UInt8) in byte == 0x20 || (byte >= 0x09 && byte <= 0x0D) }
        guard let first = input.firstIndex(where: { !isSpace($0) }), let last = input.lastIndex(where: { !isSpace($0) })
        else { return nil }
        return first..<(last + 1)
    }
}
