import CKeyutils

/// What `keyctl_describe` says of a key, `type;uid;gid;perm;description`, read in place
/// from the NUL-terminated bytes it fills in. The first four fields cannot contain `;`
/// but the description can, so everything after the fourth `;` is the description.
///
/// On `kc get`'s path (one describe of the service keyring), so it scans by hand:
/// splitting into an array of slices made the Swift runtime build that array's type by
/// name at first use, which cost more than twice the rest of a `kc get`.
public struct DescribeFields: Sendable {
    /// The type is the bytes before this offset.
    public let typeLength: Int
    /// The kernel prints ids with `%d`, so an unmapped id can appear as `-1`: its 32-bit pattern.
    public let uid: UInt32
    public let gid: UInt32
    public let permissions: UInt32
    /// Where the description starts; it runs to the NUL.
    public let descriptionOffset: Int

    /// Nil for anything that is not in that form.
    public init?(_ buffer: UnsafeRawBufferPointer) {
        var end = 0
        while end < buffer.count && buffer[end] != 0 { end += 1 }
        guard end < buffer.count else { return nil }
        var separators = (0, 0, 0, 0)
        var found = 0
        var index = 0
        while index < end && found < 4 {
            if buffer[index] == UInt8(ascii: ";") {
                switch found {
                case 0: separators.0 = index
                case 1: separators.1 = index
                case 2: separators.2 = index
                default: separators.3 = index
                }
                found += 1
            }
            index += 1
        }
        guard found == 4, separators.0 > 0,
              let uid = Self.id(buffer, from: separators.0 + 1, to: separators.1),
              let gid = Self.id(buffer, from: separators.1 + 1, to: separators.2),
              let permissions = Self.hex(buffer, from: separators.2 + 1, to: separators.3)
        else { return nil }
        typeLength = separators.0
        self.uid = uid
        self.gid = gid
        self.permissions = permissions
        descriptionOffset = separators.3 + 1
    }

    /// Whether the type field of `buffer` (the one parsed) is `type`.
    public func hasType(_ type: StaticString, in buffer: UnsafeRawBufferPointer) -> Bool {
        typeLength == type.utf8CodeUnitCount && buffer[0..<typeLength].elementsEqual(staticBytes(type))
    }

    /// A decimal id, or `-` and digits for one the kernel printed negative.
    private static func id(_ buffer: UnsafeRawBufferPointer, from start: Int, to end: Int) -> UInt32? {
        guard start < end else { return nil }
        let negative = buffer[start] == UInt8(ascii: "-")
        var value: Int64 = 0
        for index in (negative ? start + 1 : start)..<end {
            let digit = buffer[index] &- UInt8(ascii: "0")
            guard digit < 10, value <= Int64(UInt32.max) else { return nil }
            value = value * 10 + Int64(digit)
        }
        if negative {
            return value <= Int64(Int32.max) + 1 && end > start + 1 ? UInt32(bitPattern: Int32(truncatingIfNeeded: -value)) : nil
        }
        return value <= Int64(UInt32.max) ? UInt32(value) : nil
    }

    /// 1–8 hex digits (the kernel prints the mask with `%08x`).
    private static func hex(_ buffer: UnsafeRawBufferPointer, from start: Int, to end: Int) -> UInt32? {
        guard start < end, end - start <= 8 else { return nil }
        var value: UInt32 = 0
        for index in start..<end {
            guard let digit = hexDigit(buffer[index]) else { return nil }
            value = value << 4 | UInt32(digit)
        }
        return value
    }
}

/// The value of a hex digit, either case.
@inline(__always)
func hexDigit(_ byte: UInt8) -> UInt8? {
    switch byte {
    case UInt8(ascii: "0")...UInt8(ascii: "9"): return byte - UInt8(ascii: "0")
    case UInt8(ascii: "a")...UInt8(ascii: "f"): return byte - UInt8(ascii: "a") + 10
    case UInt8(ascii: "A")...UInt8(ascii: "F"): return byte - UInt8(ascii: "A") + 10
    default: return nil
    }
}

/// One `keyctl_describe`.
public enum KeyDescribe {
    /// Describes `key` and hands its fields and the whole string to `body`; nil if the
    /// describe fails, does not fit (a description is at most 4095 bytes) or does not parse.
    public static func read<Result>(_ key: Int32, _ body: (DescribeFields, UnsafeRawBufferPointer) -> Result) -> Result? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 4096 + 128) { text -> Result? in
            guard let base = text.baseAddress else { return nil }
            let length = keyctl_describe(key, base, text.count)
            guard length > 0 && length <= text.count else { return nil }
            let buffer = UnsafeRawBufferPointer(start: base, count: length)
            guard let fields = DescribeFields(buffer) else { return nil }
            return body(fields, buffer)
        }
    }
}

extension UnsafeRawBufferPointer {
    /// The C string that starts at `offset` (up to its NUL).
    public func cString(at offset: Int) -> UnsafePointer<CChar> {
        (baseAddress.unsafelyUnwrapped + offset).assumingMemoryBound(to: CChar.self)
    }
}
