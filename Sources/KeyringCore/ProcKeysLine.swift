import CKeyutils

/// One line of /proc/keys, which lists the keys the caller may view:
/// `serial flags usage expiry perm uid gid type description: summary`, fields separated
/// by runs of spaces, the type column padded. The kernel rounds the expiry down to a whole
/// unit and truncates long descriptions, so `keyctl_describe` is the authority for a key's
/// description and this line for what only it shows: the time left.
public struct ProcKeysLine: Sendable {
    public let serial: UInt32
    public let expiry: Expiry
    public let permissions: UInt32
    public let uid: UInt32
    public let gid: UInt32
    /// Where the type is in the text.
    public let type: Range<Int>
    /// Where the description is, up to the first `: ` (the kernel appends a summary after it).
    public let descriptionPrefix: Range<Int>

    /// When the key expires, as far as the line tells.
    public enum Expiry: Hashable, Sendable {
        /// `perm`: no expiry.
        case never
        /// `expd`: expired, awaiting collection.
        case expired
        /// At least `seconds` and less than `seconds + unit` seconds from now: the kernel
        /// prints whole seconds, minutes, hours, days or weeks, rounded down.
        case within(seconds: UInt64, unit: UInt64)
    }

    /// Parses the line `text[start..<end]`; nil for anything not in the kernel's form (a
    /// description holding a newline splits a line in two).
    public init?(_ text: UnsafeRawBufferPointer, from start: Int, to end: Int) {
        var fields: [Range<Int>] = []
        fields.reserveCapacity(8)
        var index = start
        while fields.count < 8 {
            while index < end && text[index] == UInt8(ascii: " ") { index += 1 }
            guard index < end else { return nil }
            let fieldStart = index
            while index < end && text[index] != UInt8(ascii: " ") { index += 1 }
            fields.append(fieldStart..<index)
        }
        while index < end && text[index] == UInt8(ascii: " ") { index += 1 }
        guard index < end,
              let serial = Self.hex(text[fields[0]]),
              let expiry = Self.expiry(text[fields[3]]),
              let permissions = Self.hex(text[fields[4]]),
              let uid = Self.id(text[fields[5]]), let gid = Self.id(text[fields[6]])
        else { return nil }
        self.serial = serial
        self.expiry = expiry
        self.permissions = permissions
        self.uid = uid
        self.gid = gid
        type = fields[7]
        var prefixEnd = index
        while prefixEnd + 1 < end && !(text[prefixEnd] == UInt8(ascii: ":") && text[prefixEnd + 1] == UInt8(ascii: " ")) {
            prefixEnd += 1
        }
        descriptionPrefix = index..<(prefixEnd + 1 < end ? prefixEnd : end)
    }

    /// Calls `body` with each line of `text` that parses, until it returns false.
    public static func forEach(in text: UnsafeRawBufferPointer, _ body: (ProcKeysLine) -> Bool) {
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            if let line = ProcKeysLine(text, from: start, to: end), !body(line) { return }
            start = end + 1
        }
    }

    /// Whether the line is about a keyring whose description starts as a kc service's does.
    public func isServiceKeyring(in text: UnsafeRawBufferPointer) -> Bool {
        text[type].elementsEqual(staticBytes("keyring"))
            && ServiceKeyringProbe.prefixes.contains { text[descriptionPrefix].starts(with: staticBytes($0)) }
    }

    /// 1–8 hex digits, as the kernel prints a serial or a mask.
    private static func hex(_ field: Slice<UnsafeRawBufferPointer>) -> UInt32? {
        guard !field.isEmpty && field.count <= 8 else { return nil }
        var value: UInt32 = 0
        for byte in field {
            guard let digit = hexDigit(byte) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }

    /// A uid or gid as the kernel prints it (`%5d`): decimal digits, or a minus and digits
    /// for an id over 2^31 (its 32-bit pattern).
    private static func id(_ field: Slice<UnsafeRawBufferPointer>) -> UInt32? {
        let negative = field.first == UInt8(ascii: "-")
        let digits = negative ? field.dropFirst() : field
        guard let value = decimal(digits) else { return nil }
        if negative {
            guard value >= 1 && value <= 0x8000_0000 else { return nil }
            return UInt32(truncatingIfNeeded: 0x1_0000_0000 - value)
        }
        return value <= 0xFFFF_FFFF ? UInt32(value) : nil
    }

    /// `perm`, `expd`, or a count and a unit (s, m, h, d, w).
    private static func expiry(_ field: Slice<UnsafeRawBufferPointer>) -> Expiry? {
        if field.elementsEqual(staticBytes("perm")) { return .never }
        if field.elementsEqual(staticBytes("expd")) { return .expired }
        guard let last = field.last, let count = decimal(field.dropLast()), let unit = secondsPerUnit(last) else { return nil }
        return .within(seconds: count * unit, unit: unit)
    }

    /// The seconds in one of the kernel's units of time (s, m, h, d, w), which kc's
    /// durations (`--timeout 1h30m`) use too; nil for any other byte.
    public static func secondsPerUnit(_ unit: UInt8) -> UInt64? {
        switch unit {
        case UInt8(ascii: "s"): return 1
        case UInt8(ascii: "m"): return 60
        case UInt8(ascii: "h"): return 3600
        case UInt8(ascii: "d"): return 86400
        case UInt8(ascii: "w"): return 604800
        default: return nil
        }
    }

}

/// The value of 1–10 decimal digits (an id, a count: the kernel's and the account files').
func decimal(_ digits: Slice<UnsafeRawBufferPointer>) -> UInt64? {
    guard !digits.isEmpty && digits.count <= 10 else { return nil }
    var value: UInt64 = 0
    for byte in digits {
        guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
        value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
    }
    return value
}
