import CKeyutils

// The keyring core (docs/DESIGN-NOTES.md, "One core for both programs"): the rules and
// kernel calls both kc programs share, written in the Embedded Swift subset so that the
// front (Tools/build-front.sh) compiles these very files, and SwiftPM builds them as the
// KeyringCore module for the full kc, its daemons and the tests. Names are bytes, not
// necessarily UTF-8, so nothing here makes a String of one.

/// Bytes built up for a kernel call, a path or a line of output.
public struct ByteText {
    public private(set) var bytes: [UInt8] = []

    public init() {}

    public init(_ bytes: [UInt8]) { self.bytes = bytes }

    public mutating func append(_ text: StaticString) {
        bytes.append(contentsOf: UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
    }

    public mutating func append(_ text: UnsafePointer<CChar>) {
        bytes.append(contentsOf: UnsafeRawBufferPointer(start: text, count: strlen(text)))
    }

    /// Appends `value` in decimal digits.
    public mutating func append(decimal value: UInt64) {
        var digits: [UInt8] = []
        var rest = value
        repeat {
            digits.append(UInt8(ascii: "0") + UInt8(rest % 10))
            rest /= 10
        } while rest > 0
        bytes.append(contentsOf: digits.reversed())
    }

    public mutating func append(_ other: [UInt8]) {
        bytes.append(contentsOf: other)
    }

    /// Appends `name` as kc shows a name in a message (``NameRules/appendShown(_:to:)``).
    public mutating func appendShown(_ name: UnsafePointer<CChar>) {
        NameRules.appendShown(UnsafeRawBufferPointer(start: name, count: strlen(name)), to: &bytes)
    }

    /// Calls `body` with the bytes and a NUL after them.
    public func withCString<Result>(_ body: (UnsafePointer<CChar>) -> Result) -> Result {
        var terminated = bytes
        terminated.append(0)
        // Never empty (it holds the NUL), so it has a base address.
        return terminated.withUnsafeBufferPointer { buffer in
            buffer.withMemoryRebound(to: CChar.self) { body($0.baseAddress.unsafelyUnwrapped) }
        }
    }
}

/// The bytes of an ASCII literal, without making a String.
@inline(__always)
public func staticBytes(_ text: StaticString) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
}

/// A literal as a C string, for a kernel or libc call.
@inline(__always)
public func cString(_ text: StaticString) -> UnsafePointer<CChar> {
    UnsafeRawPointer(text.utf8Start).assumingMemoryBound(to: CChar.self)
}
