import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

/// This filesystem's mounts as /proc names them, for telling whether a process still
/// has one of its files open (``FuseBridge/flush(handle:caller:inode:)``).
///
/// A process's /proc/PID/fdinfo/N gives each descriptor's `mnt_id` and `ino`; an inode
/// number alone is not enough (the mount's items are numbered 3, 4, 5, … as
/// `/dev/null` and `/dev/pts/0` are), so a descriptor is this filesystem's only if its
/// mount is one of ours: the mount made at the mount point (`fuse.kc`, the last one
/// there) and every mount of the same device in this namespace (bind mounts).
enum OwnMounts {
    /// The ids of the `fuse.kc` mount at `mountpoint` (absolute, as given before the
    /// mount: after it, resolving it would ask this filesystem) and of the other mounts
    /// of its device, from /proc/self/mountinfo. Empty if it cannot be read.
    static func ids(at mountpoint: String) -> Set<Int> {
        guard let text = readProcBytes("/proc/self/mountinfo").map({ String(decoding: $0, as: UTF8.self) }) else { return [] }
        // mountinfo: ID PARENT MAJOR:MINOR ROOT MOUNTPOINT OPTIONS [FIELDS...] - TYPE SOURCE SUPER
        var entries: [(id: Int, device: Substring, mountpoint: String, type: Substring)] = []
        for line in text.split(separator: "\n") {
            let fields = line.split(separator: " ", omittingEmptySubsequences: false)
            guard fields.count > 5, let id = Int(fields[0]), let dash = fields.firstIndex(of: "-"), dash + 1 < fields.count else { continue }
            entries.append((id, fields[2], unescaped(fields[4]), fields[dash + 1]))
        }
        guard let ours = entries.last(where: { $0.mountpoint == mountpoint && $0.type == "fuse.kc" }) else { return [] }
        return Set(entries.filter { $0.device == ours.device }.map(\.id))
    }

    /// Whether process `pid` may still hold inode `number` of this filesystem open:
    /// true if one of its descriptors does (its fdinfo names one of `mounts` and the
    /// inode), and true when its descriptors cannot be read (a process that is not
    /// dumpable, or another uid's under `--allow-other`): then the last close stores.
    /// False if none does, or if this filesystem's mounts are not known.
    static func process(_ pid: Int32, mayHoldInode number: UInt64, onMounts mounts: Set<Int>) -> Bool {
        guard pid > 0, !mounts.isEmpty else { return false }
        guard let folder = opendir("/proc/\(pid)/fdinfo") else { return errno == EACCES }
        defer { closedir(folder) }
        let wantedInode = "ino:\t\(number)"
        while let entry = readdir(folder) {
            let name = withUnsafeBytes(of: entry.pointee.d_name) { String(decoding: $0.prefix(while: { $0 != 0 }), as: UTF8.self) }
            guard let first = name.utf8.first, first >= UInt8(ascii: "0"), first <= UInt8(ascii: "9"),
                  let text = readSmallFile("/proc/\(pid)/fdinfo/\(name)") else { continue }
            let lines = text.split(separator: "\n")
            guard lines.contains(where: { $0 == wantedInode }),
                  let mount = lines.first(where: { $0.hasPrefix("mnt_id:") }).flatMap({ Int($0.dropFirst(7).trimmingPrefix(while: { $0 == "\t" || $0 == " " })) }),
                  mounts.contains(mount) else { continue }
            return true
        }
        return false
    }

    /// A mountinfo path field: spaces, tabs, newlines and backslashes are written as
    /// octal escapes (`\040`).
    private static func unescaped(_ field: Substring) -> String {
        var bytes: [UInt8] = []
        var utf8 = Array(field.utf8)[...]
        while let byte = utf8.popFirst() {
            if byte == UInt8(ascii: "\\"), utf8.count >= 3,
               let value = UInt8(String(decoding: utf8.prefix(3), as: UTF8.self), radix: 8) {
                bytes.append(value)
                utf8 = utf8.dropFirst(3)
            } else {
                bytes.append(byte)
            }
        }
        return String(decoding: bytes, as: UTF8.self)
    }
}
