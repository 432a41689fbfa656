import SystemPackage
import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#endif

/// The bytes being written through one writable open of a file: a private copy, so
/// each open is one atomic replacement of the value (`printf v > f` racing another
/// never stores a mix of the two), stored in the kernel when the opener closes.
///
/// - An `O_APPEND` open appends to the end of its own copy, whatever offset the kernel
///   computed from the size it last saw, so no byte appears that nobody wrote.
/// - A write that fails (over 32767 bytes, over the key quota, no room on the vault's
///   disk) poisons it: nothing is stored, and every later close reports the error,
///   until it is truncated again.
/// - It follows `mv` (``OpenHandles/renamePending(_:to:)``), and after `rm` it is
///   detached and stores nothing, like a write to an unlinked file.
/// - `newItem` is nil when the file was an item at open: then it only ever replaces
///   that item's value (keeping its level and deadline), and stores nothing if the
///   item was removed meanwhile. Otherwise the item is created with those attributes,
///   which extended attributes set on the open file change.
final class PendingWrite: Sendable {
    private struct State {
        var node: Node
        var bytes: [UInt8]
        var dirty: Bool
        var failure: FilesystemError?
        var unlinked = false
        var newItem: NewItemAttributes?
        /// The size the key quota was last checked for.
        var roomCheckedFor: Int
        /// Whether room was asked at all: the first write asks whatever its size (the
        /// vault's disk may be full for any), later ones as the value grows.
        var roomAsked = false
        /// Whether anything was written or truncated through this open after it began.
        var touched = false
    }

    private let state: Locked<State>

    let appends: Bool

    init(node: Node, bytes: [UInt8], dirty: Bool, newItem: NewItemAttributes?, appends: Bool = false) {
        state = Locked(State(node: node, bytes: bytes, dirty: dirty, newItem: newItem, roomCheckedFor: max(bytes.count, 1)))
        self.appends = appends
    }

    var isUnlinked: Bool { state.withLock { $0.unlinked } }

    /// Empty, as the open left it (`O_TRUNC`, or a new file), with nothing written since
    /// (and no write refused: a failure is reported at every close).
    var isUntouchedEmpty: Bool { state.withLock { !$0.touched && $0.bytes.isEmpty && $0.failure == nil } }

    var node: Node { state.withLock { $0.node } }
    var size: Int { state.withLock { $0.bytes.count } }
    /// The attributes the file will be created with; nil once it is an item.
    var newItem: NewItemAttributes? { state.withLock { $0.newItem } }

    func read(offset: Int, count: Int) -> [UInt8] {
        state.withLock { Self.slice(of: $0.bytes, offset: offset, count: count) }
    }

    static func slice(of bytes: [UInt8], offset: Int, count: Int) -> [UInt8] {
        guard offset >= 0, offset < bytes.count, count > 0 else { return [] }
        return Array(bytes[offset..<min(bytes.count, offset + count)])
    }

    /// Writes at `offset`; past the end the gap reads as zeros, as on any filesystem.
    /// `room` is asked (outside the lock) at the first write, and before the value grows
    /// past what was checked.
    func write(_ data: UnsafeRawBufferPointer, offset requested: Int, room: (Int, Int) throws(FilesystemError) -> Void) throws(FilesystemError) {
        let (end, checked, asked, failure) = state.withLock { ($0.bytes.count, $0.roomCheckedFor, $0.roomAsked, $0.failure) }
        if let failure { throw failure }
        let offset = appends ? end : requested
        let newEnd = offset + data.count
        do throws(FilesystemError) {
            guard offset >= 0, newEnd <= KeychainError.maximumValueSize else { throw FilesystemError(.fileTooLarge) }
            if !asked || max(newEnd, end) > checked { try room(checked, max(newEnd, end)) }
        } catch {
            poison(error)
            throw error
        }
        state.withLock { state in
            state.roomAsked = true
            state.roomCheckedFor = max(state.roomCheckedFor, newEnd)
            if state.bytes.count < newEnd {
                state.bytes += [UInt8](repeating: 0, count: newEnd - state.bytes.count)
            }
            state.bytes.withUnsafeMutableBytes { destination in
                UnsafeMutableRawBufferPointer(rebasing: destination[offset..<newEnd]).copyMemory(from: data)
            }
            state.dirty = true
            state.touched = true
        }
    }

    /// `ftruncate`/`O_TRUNC`. Truncating to zero also clears a poisoning failure: the
    /// writer starts over.
    func resize(to size: Int) throws(FilesystemError) {
        guard size >= 0, size <= KeychainError.maximumValueSize else {
            poison(FilesystemError(.fileTooLarge))
            throw FilesystemError(.fileTooLarge)
        }
        state.withLock { state in
            if size < state.bytes.count {
                for index in size..<state.bytes.count { state.bytes[index] = 0 }
                state.bytes.removeLast(state.bytes.count - size)
            } else {
                state.bytes += [UInt8](repeating: 0, count: size - state.bytes.count)
            }
            if size == 0 { state.failure = nil }
            state.dirty = true
            state.touched = true
        }
    }

    private func poison(_ error: FilesystemError) {
        state.withLock { $0.failure = error }
    }

    /// Stores the bytes if they changed since the last store. A poisoned file stores
    /// nothing and throws its error; an unlinked one stores nothing. Bytes whose store
    /// failed are not stored by a later close either, unless written again.
    func commit(to filesystem: KeychainFilesystem) throws {
        let pending: (bytes: [UInt8], node: Node, newItem: NewItemAttributes?)? = try state.withLock { state throws(FilesystemError) in
            if let failure = state.failure { throw failure }
            guard state.dirty, !state.unlinked else { return nil }
            return (state.bytes, state.node, state.newItem)
        }
        guard var work = pending else { return }
        defer { work.bytes.overwriteWithZeros() }
        let stored: Bool
        do {
            stored = try filesystem.commit(work.bytes, to: work.node, newItem: work.newItem)
        } catch {
            // The closer is told these bytes were not stored: no later close, and not the
            // last release, may store them after all (a retry that succeeds, the vault's
            // disk having room again, would change the value behind its back). New
            // writes make it dirty again.
            state.withLock { state in
                if state.node == work.node && state.bytes == work.bytes { state.dirty = false }
            }
            throw error
        }
        state.withLock { state in
            guard state.node == work.node else { return }  // renamed meanwhile: store again
            if !stored { state.unlinked = true }  // removed behind our back
            state.newItem = nil
            if state.bytes == work.bytes { state.dirty = false }
        }
    }

    /// Sets an extended attribute of a file that is not an item yet. False if it is one.
    func setAttribute(_ name: String, to text: String) throws(FilesystemError) -> Bool {
        try state.withLock { state throws(FilesystemError) in
            guard var attributes = state.newItem else { return false }
            try attributes.set(name, to: text)
            state.newItem = attributes
            return true
        }
    }

    fileprivate func renamed(to node: Node) { state.withLock { $0.node = node } }

    /// Its writer was killed: what it wrote is dropped, not stored at a later close.
    func abandon() {
        state.withLock { state in
            state.bytes.overwriteWithZeros()
            state.dirty = false
        }
    }
    fileprivate func unlink() { state.withLock { $0.unlinked = true } }

    /// Zeroes the bytes: the daemon keeps no secret once a file is closed.
    func discard() {
        state.withLock { state in
            state.bytes.overwriteWithZeros()
            state.bytes = []
            state.dirty = false
        }
    }
}

/// One open file (`fi->fh`). A read-only open reads a private copy of the value taken
/// at open, so every read of one open sees one whole value; a writable one works on the
/// file's ``PendingWrite``.
final class OpenFile: Sendable {
    /// Readers: the value at open. Writers: nil.
    private let snapshot: Locked<[UInt8]>?
    let pending: PendingWrite?
    /// The process (thread group) that opened the file. Only its close stores the value:
    /// a child that inherited the descriptor and closes it (at exec, or at exit) must
    /// not publish a half-written value.
    let opener: Int32

    init(reading bytes: [UInt8], opener: Int32) {
        snapshot = Locked(bytes)
        pending = nil
        self.opener = opener
    }

    init(writing pending: PendingWrite, opener: Int32) {
        snapshot = nil
        self.pending = pending
        self.opener = opener
    }

    var writable: Bool { pending != nil }

    func read(offset: Int, count: Int) -> [UInt8] {
        if let pending { return pending.read(offset: offset, count: count) }
        return snapshot?.withLock { PendingWrite.slice(of: $0, offset: offset, count: count) } ?? []
    }

    /// Zeroes the reader's copy.
    func discard() {
        snapshot?.withLock { bytes in
            bytes.overwriteWithZeros()
            bytes = []
        }
    }
}

/// A directory listing taken at opendir, served in pieces by readdir.
final class OpenDirectory: Sendable {
    struct Entry: Sendable {
        var name: KeyName
        var number: UInt64
        var isDirectory: Bool
    }

    let entries: [Entry]

    init(entries: [Entry]) { self.entries = entries }
}

/// The handles (`fi->fh`) of open files and directories. A file's pending writes are
/// found through the handles open for writing on it.
final class OpenHandles: Sendable {
    private struct State {
        var files: [UInt64: OpenFile] = [:]
        var directories: [UInt64: OpenDirectory] = [:]
        var next: UInt64 = 1

        func pending(_ node: Node) -> [PendingWrite] {
            files.values.compactMap(\.pending).filter { $0.node == node && !$0.isUnlinked }
        }
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

    /// The pending writes of a file, one per open for writing.
    func pending(_ node: Node) -> [PendingWrite] { state.withLock { $0.pending(node) } }

    /// The size of a file being written that nothing is stored for yet: the largest
    /// pending copy.
    func pendingSize(of node: Node) -> Int? { pending(node).map(\.size).max() }

    /// `rm` of a file open for writing: its pending writes are detached and will store
    /// nothing. Returns whether there were any.
    func unlinkPending(_ node: Node) -> Bool {
        state.withLock { state in
            let found = state.pending(node)
            found.forEach { $0.unlink() }
            return !found.isEmpty
        }
    }

    /// `mv` of a file open for writing, or of the service directory holding such files:
    /// their pending writes will be stored under the new name. Pending writes of the
    /// target are detached (it is replaced). Returns whether any moved.
    @discardableResult
    func renamePending(_ source: Node, to target: Node) -> Bool {
        state.withLock { state in
            let writes = state.files.values.compactMap(\.pending).filter { !$0.isUnlinked }
            var moves: [(PendingWrite, Node)] = []
            for pending in writes {
                let node = pending.node
                if node == source {
                    moves.append((pending, target))
                } else if case .service(let from) = source, case .service(let to) = target, case .item(from, let name) = node {
                    moves.append((pending, .item(service: to, name: name)))
                }
            }
            if case .item = target { writes.filter { $0.node == target }.forEach { $0.unlink() } }
            for (pending, node) in moves { pending.renamed(to: node) }
            return !moves.isEmpty
        }
    }
}

/// Whether the thread is exiting because a signal killed it (kill -9 in the middle of
/// a write). The kernel sets the exit code before it closes the dying process's files,
/// so the FLUSH of that close can read it: field 52 of /proc/<tid>/stat, in wait(2)'s
/// form, whose low seven bits are the killing signal. False if it cannot be read.
func killedBySignal(_ thread: Int32) -> Bool {
    guard thread > 0, let text = readSmallFile("/proc/\(thread)/stat"),
          let close = text.lastIndex(of: ")")
    else { return false }
    // After the command name: field 3 (state) onwards.
    let fields = text[text.index(after: close)...].split(whereSeparator: { $0 == " " || $0 == "\n" })
    guard fields.count > 49, let exitCode = Int32(fields[49]) else { return false }
    return exitCode & 0x7f != 0
}

/// The thread group (process) of a thread id the kernel names in a request, from
/// /proc/<tid>/status; the id itself if that cannot be read (the process is gone).
func threadGroup(of thread: Int32) -> Int32 {
    guard thread > 0, let text = readSmallFile("/proc/\(thread)/status") else { return thread }
    for line in text.split(separator: "\n") where line.hasPrefix("Tgid:") {
        if let tgid = Int32(line.dropFirst(5).trimmingPrefix(while: { $0 == " " || $0 == "\t" })) { return tgid }
    }
    return thread
}

/// The first 1 KiB of a /proc file, or nil.
func readSmallFile(_ path: String) -> String? {
    let fd = open(path, O_RDONLY | O_CLOEXEC)
    guard fd >= 0 else { return nil }
    defer { close(fd) }
    var buffer = [UInt8](repeating: 0, count: 1024)
    let count = buffer.withUnsafeMutableBytes { read(fd, $0.baseAddress, $0.count) }
    guard count > 0 else { return nil }
    return String(decoding: buffer[..<count], as: UTF8.self)
}
