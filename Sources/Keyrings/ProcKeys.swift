import KeyringCore

/// One line of /proc/keys, which lists the keys the caller may view:
/// `serial flags usage expiry perm uid gid type description: summary`.
///
/// The kernel pads the type column and rounds the expiry down to a whole unit, so
/// `keyctl_describe` is the authority for a key's description and this line for
/// what only it shows: the time left.
public struct ProcKeysEntry: Hashable, Sendable {
    public var serial: KeySerial
    public var expiry: Expiry
    public var permissions: KeyPermissions
    public var uid: UInt32
    public var gid: UInt32
    public var type: String
    /// The description up to the first `: ` (the kernel appends a summary after it,
    /// and truncates long descriptions); use `keyctl_describe` for the exact text.
    public var descriptionPrefix: Substring

    /// When the key expires, as far as the line tells (the core's reading of the column).
    public typealias Expiry = ProcKeysLine.Expiry

    /// The entry of a line the core's ``ProcKeysLine`` parsed from `text`.
    init(_ line: ProcKeysLine, in text: UnsafeRawBufferPointer) {
        serial = KeySerial(rawValue: Int32(bitPattern: line.serial))
        expiry = line.expiry
        permissions = KeyPermissions(rawValue: line.permissions)
        uid = line.uid
        gid = line.gid
        type = String(decoding: UnsafeRawBufferPointer(rebasing: text[line.type]), as: UTF8.self)
        // The type column is padded; the padding stays in front of the description.
        descriptionPrefix = Substring(String(decoding: UnsafeRawBufferPointer(rebasing: text[line.descriptionPrefix]),
                                             as: UTF8.self))
    }

    /// Parses one line; nil for anything not in the kernel's form (a description
    /// holding a newline splits a line in two).
    public init?(parsing line: Substring) {
        var text = String(line)
        guard let entry = text.withUTF8({ bytes -> ProcKeysEntry? in
            let raw = UnsafeRawBufferPointer(bytes)
            return ProcKeysLine(raw, from: 0, to: raw.count).map { ProcKeysEntry($0, in: raw) }
        }) else { return nil }
        self = entry
    }

    /// Every well-formed line of a /proc/keys text: its lines split at each line feed,
    /// by the core's ``ProcKeysLine``, as the front reads them.
    public static func parse(_ text: String) -> [ProcKeysEntry] {
        var text = text
        return text.withUTF8 { bytes in parse(UnsafeRawBufferPointer(bytes)) }
    }

    /// ``parse(_:)-(String)`` of the file's bytes.
    public static func parse(_ bytes: UnsafeRawBufferPointer) -> [ProcKeysEntry] {
        var entries: [ProcKeysEntry] = []
        ProcKeysLine.forEach(in: bytes) { line in
            entries.append(ProcKeysEntry(line, in: bytes))
            return true
        }
        return entries
    }
}
