import KeyringCore

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// Reads a small kernel text file (/proc, /sys) whole. Nil if it cannot be opened.
internal func readProcFile(_ path: String) -> String? {
    readProcBytes(path).map { String(decoding: $0, as: UTF8.self) }
}

/// Reads a small file whole. Files under /proc report a size of 0, so this reads
/// until end of file. A link is not followed. (`package`: kc's mount code reads
/// /proc with it too.)
package func readProcBytes(_ path: String) -> [UInt8]? {
    FileBytes.read(path, followingLinks: false, limit: Int.max)
}

/// The bytes of a NUL-terminated C string, without the NUL; not decoded, so bytes that
/// are not UTF-8 (a folder's name, an argument) stay as they are. (`package`: kc uses it
/// for argv and the environment.)
package func cStringBytes(_ pointer: UnsafePointer<CChar>) -> [UInt8] {
    Array(UnsafeRawBufferPointer(start: pointer, count: strlen(pointer)))
}

/// Reads a sysctl under /proc/sys as an integer, e.g. `kernel/keys/maxkeys`.
internal func readSysctl(_ name: String) -> Int? {
    readProcFile("/proc/sys/" + name).flatMap { Int($0.filter { !$0.isWhitespace }) }
}
