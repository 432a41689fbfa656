
import SystemPackage
import KernelKeychain

/// One open file: a private copy of the value, read from the kernel at open (so every
/// read of one open sees one whole value) or built up by writes and stored when the
/// file is closed (so a reader never sees half a write).
final class OpenFile: Sendable {
    let node: Node
    let writable: Bool

    private struct State {
        var bytes: [UInt8]
        var dirty: Bool
    }

    private let state: Locked<State>

    init(node: Node, bytes: [UInt8], writable: Bool, dirty: Bool) {
        self.node = node
        self.writable = writable
        self.state = Locked(State(bytes: bytes, dirty: dirty))
    }

    var size: Int { state.withLock { $0.bytes.count } }

    func read(offset: Int, count: Int) -> [UInt8] {
        state.withLock { state in
            guard offset < state.bytes.count, count > 0 else { return [] }
            return Array(state.bytes[offset..<min(state.bytes.count, offset + count)])
        }
    }

    /// EFBIG past the largest value a key can hold.
    func write(_ data: UnsafeRawBufferPointer, offset: Int) throws(FilesystemError) {
        guard offset >= 0, offset + data.count <= KeychainError.maximumValueSize else { throw FilesystemError(.fileTooLarge) }
        state.withLock { state in
            if state.bytes.count < offset + data.count {
                state.bytes += [UInt8](repeating: 0, count: offset + data.count - state.bytes.count)
            }
            state.bytes.withUnsafeMutableBytes { destination in
                UnsafeMutableRawBufferPointer(rebasing: destination[offset..<offset + data.count]).copyMemory(from: data)
            }
            state.dirty = true
        }
    }

    func resize(to size: Int) throws(FilesystemError) {
        guard size >= 0, size <= KeychainError.maximumValueSize else { throw FilesystemError(.fileTooLarge) }
        state.withLock { state in
            if size < state.bytes.count {
                for index in size..<state.bytes.count { state.bytes[index] = 0 }
                state.bytes.removeLast(state.bytes.count - size)
            } else {
                state.bytes += [UInt8](repeating: 0, count: size - state.bytes.count)
            }
            state.dirty = true
        }
    }

    /// Stores the bytes if they changed since the last store. On failure the file stays
    /// dirty, so a later flush or the release tries again.
    func commit(to filesystem: KeychainFilesystem) throws(FilesystemError) {
        let pending: [UInt8]? = state.withLock { $0.dirty ? $0.bytes : nil }
        guard var bytes = pending else { return }
        defer { bytes.overwriteWithZeros() }
        try filesystem.write(bytes, to: node)
        state.withLock { $0.dirty = false }
    }

    /// Zeroes the copy: the daemon keeps no secret once a file is closed.
    func discard() {
        state.withLock { state in
            state.bytes.overwriteWithZeros()
            state.bytes = []
            state.dirty = false
        }
    }
}

/// A directory listing taken at opendir, served in pieces by readdir.
final class OpenDirectory: Sendable {
    struct Entry: Sendable {
        var name: String
        var number: UInt64
        var isDirectory: Bool
    }

    let entries: [Entry]

    init(entries: [Entry]) { self.entries = entries }
}

/// The handles (`fi->fh`) of open files and directories.
final class OpenHandles: Sendable {
    private struct State {
        var files: [UInt64: OpenFile] = [:]
        var directories: [UInt64: OpenDirectory] = [:]
        var next: UInt64 = 1
    }

    private let state = Locked(State())

    func add(_ file: OpenFile) -> UInt64 { insert { $0.files[$1] = file } }
    func add(_ directory: OpenDirectory) -> UInt64 { insert { $0.directories[$1] = directory } }

    /// Takes the next handle number and files the object under it.
    private func insert(_ file: (inout State, UInt64) -> Void) -> UInt64 {
        state.withLock { state in
            let handle = state.next
            state.next += 1
            file(&state, handle)
            return handle
        }
    }

    func file(_ handle: UInt64) -> OpenFile? { state.withLock { $0.files[handle] } }
    func directory(_ handle: UInt64) -> OpenDirectory? { state.withLock { $0.directories[handle] } }
    func removeFile(_ handle: UInt64) -> OpenFile? { state.withLock { $0.files.removeValue(forKey: handle) } }
    func removeDirectory(_ handle: UInt64) { state.withLock { _ = $0.directories.removeValue(forKey: handle) } }

    /// The size of a file being written and not yet stored, for stat.
    func pendingSize(of node: Node) -> Int? {
        let writers = state.withLock { $0.files.values.filter { $0.writable && $0.node == node } }
        return writers.map(\.size).max()
    }
}
