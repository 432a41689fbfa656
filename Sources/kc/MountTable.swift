import KernelKeychain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// One line of /proc/self/mountinfo (proc(5)): what is mounted where, as the kernel
/// sees it now. Reading it never talks to a FUSE daemon, so it cannot hang.
struct MountEntry: Equatable {
    /// The mount's unique id, as `mnt_id:` in /proc/self/fdinfo shows it.
    var id: Int
    /// Absolute, without a trailing slash, octal escapes (`\040`) undone.
    var mountPoint: String
    /// `fuse.kc` for a kc mount: libfuse's `fuse.` and kc-mountd's `subtype=kc`.
    var filesystemType: String
    var superOptions: [String]

    var isKC: Bool { filesystemType == "fuse.kc" }

    /// The uid a FUSE mount belongs to (its `user_id=` option; the kernel lets only that
    /// uid in unless `allow_other`). Nil for other filesystems.
    var fuseOwner: uid_t? {
        superOptions.first { $0.hasPrefix("user_id=") }.flatMap { uid_t($0.dropFirst("user_id=".count)) }
    }
}

enum MountTable {
    /// The mounts of this process's mount namespace, in the kernel's order (a mount
    /// stacked on another comes after it).
    static func entries() -> [MountEntry] {
        guard let table = readProcBytes("/proc/self/mountinfo") else { return [] }
        return table.split(separator: UInt8(ascii: "\n")).compactMap(entry)
    }

    /// `36 35 98:0 /mnt1 /mnt2 rw,noatime master:1 - ext3 /dev/root rw,errors=continue`:
    /// five fixed fields, optional fields up to `-`, then type, source, super options.
    private static func entry(_ line: ArraySlice<UInt8>) -> MountEntry? {
        let fields = line.split(separator: UInt8(ascii: " "), omittingEmptySubsequences: false)
        guard fields.count >= 10, let id = Int(String(decoding: fields[0], as: UTF8.self)),
              let separator = fields[6...].firstIndex(where: { $0.elementsEqual("-".utf8) }),
              fields.count > separator + 3 else { return nil }
        return MountEntry(
            id: id,
            mountPoint: String(decoding: unescaped(fields[4]), as: UTF8.self),
            filesystemType: String(decoding: unescaped(fields[separator + 1]), as: UTF8.self),
            superOptions: String(decoding: fields[separator + 3], as: UTF8.self).split(separator: ",").map(String.init))
    }

    /// The kernel writes space, tab, newline and backslash in a path as `\ooo`.
    private static func unescaped(_ field: ArraySlice<UInt8>) -> [UInt8] {
        var bytes: [UInt8] = []
        var index = field.startIndex
        while index < field.endIndex {
            let digits = field[index...].dropFirst().prefix(3)
            if field[index] == UInt8(ascii: "\\"), digits.count == 3, digits.allSatisfy({ (48...55).contains($0) }),
               let byte = UInt8(String(decoding: digits, as: UTF8.self), radix: 8) {
                bytes.append(byte)
                index += 4
            } else {
                bytes.append(field[index])
                index += 1
            }
        }
        return bytes
    }
}

