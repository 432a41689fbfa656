import SystemPackage

/// The one answer a request gets. Every operation computes a `Reply` and the
/// trampoline in Operations.swift sends it, so each request is answered exactly once.
enum Reply {
    case error(Errno)
    case success
    case entry(number: UInt64, attributes: NodeAttributes)
    case attributes(number: UInt64, attributes: NodeAttributes)
    /// `noFlush`: close(2) sends no FLUSH (a read-only file has nothing to store).
    case open(handle: UInt64, directIO: Bool, noFlush: Bool)
    case create(number: UInt64, attributes: NodeAttributes, handle: UInt64)
    case bytes([UInt8])
    case attributeSize(Int)
    case written(Int)
    case statistics(FilesystemStatistics)
    case directory(OpenDirectory, offset: Int, maxSize: Int)
    /// forget: the kernel expects no answer.
    case none
}
