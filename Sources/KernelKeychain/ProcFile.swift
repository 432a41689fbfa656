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
    let fd = open(path, O_RDONLY | O_CLOEXEC | O_NOFOLLOW)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var bytes: [UInt8] = []
    var chunk = [UInt8](repeating: 0, count: 4096)
    while true {
        let count = chunk.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
        if count < 0 {
            if errno == EINTR { continue }
            return nil
        }
        if count == 0 { break }
        bytes.append(contentsOf: chunk[..<count])
    }
    return bytes
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
