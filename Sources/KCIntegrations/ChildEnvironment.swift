import KernelKeychain

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// The environment `kc exec` gives its command, as exact `NAME=value` bytes.
///
/// Environment strings are bytes, not text: a variable kc inherited, or an item's value,
/// need not be UTF-8, and the command must see it unchanged (a `String` would turn every
/// invalid byte into U+FFFD). So the inherited environment is read from `environ` as C
/// strings, and items are added as bytes.
public struct ChildEnvironment {
    /// `NAME=value` entries, without the terminating NUL, in `environ`'s order.
    public private(set) var entries: [[UInt8]]

    /// This process's environment, byte for byte.
    public static func inherited() -> ChildEnvironment {
        var entries: [[UInt8]] = []
        var pointer = environ
        while let entry = pointer.pointee {
            entries.append(cStringBytes(entry))
            pointer += 1
        }
        return ChildEnvironment(entries: entries)
    }

    /// Sets `name` to `value`, replacing every inherited entry of that name.
    ///
    /// - Precondition: `name` is an environment name (kc makes them: ASCII, no `=`), and
    ///   `value` has no NUL byte, which cannot be in an environment string; the caller
    ///   refuses such a value with a message first.
    public mutating func set(_ name: String, to value: some Collection<UInt8>) {
        let nameBytes = Array(name.utf8)
        for index in entries.indices.reversed() {
            // An entry without '=' is all name.
            let existing = entries[index]
            let end = existing.firstIndex(of: UInt8(ascii: "=")) ?? existing.endIndex
            guard existing[..<end].elementsEqual(nameBytes) else { continue }
            entries[index].overwriteWithZeros()
            entries.remove(at: index)
        }
        var entry = nameBytes
        entry.reserveCapacity(nameBytes.count + 1 + value.count)
        entry.append(UInt8(ascii: "="))
        entry.append(contentsOf: value)
        entries.append(entry)
    }

    /// Zeroes every entry: some hold item values.
    public mutating func overwriteWithZeros() {
        for index in entries.indices { entries[index].overwriteWithZeros() }
    }
}
