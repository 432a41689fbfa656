import CKeyutils

/// `kc set [--] SERVICE ITEM` with names the full kc takes as they are, served where the
/// full kc's store is its common write: an item that exists, set again in place.
///
/// The full kc (Sources/kc/Set.swift, `StoreRequest.run`; Sources/KernelKeychain:
/// `Keychain.store` → `replaceExisting` → `Placement.replace`) reads standard input to
/// its end (at most one byte over 32767), then, with no vault to journal the change in,
/// finds the item as a read finds it (the service keyring from the session keyring, its
/// owner and mask, the `user` key in it), looks for a deadline record of the key (the
/// `kc.expiry` keyring in the user keyring), and for a value of at most a page with no
/// record updates that same key in place with `keyctl_update`: its level, permissions,
/// sharing and expiry stay as they were. Nothing is printed.
///
/// The front does exactly that, in that order. Where anything differs (a terminal to
/// prompt at, a vault or a stashed vault key, a namespace, a keyring to repair, no such
/// item at home, a record, an empty, long or too long value, a failed update), the full
/// kc decides; it must read the same value, so the bytes the front read are handed to it
/// as its standard input, in a memory file (docs/FRONT.md says why that is the same).
struct PlainSet {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>

    /// The most an item holds (`KeychainError.maximumValueSize`); the full kc reads one
    /// byte more to tell a value that is too long.
    private static let maximumValueSize = 32767

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard let line = plainNames(argc: argc, argv: argv, command: "set", count: 2, takesQuiet: false) else { return nil }
        service = line.names[0]
        item = line.names[1]
    }

    /// Stores the value and exits 0 where the full kc would update the existing item in
    /// place; otherwise returns, standard input then being either untouched (a terminal:
    /// the full kc prompts) or the bytes read, exactly, for the full kc to read.
    func serveIfUpdatingInPlace() {
        // At a terminal the full kc prompts twice, without echo: its to do.
        guard isatty(0) != 1 else { return }
        let callersLimit = CoreDumps.disable()
        withUnsafeTemporaryAllocation(byteCount: Self.maximumValueSize + 1, alignment: 8) { buffer in
            guard let base = buffer.baseAddress else { return }
            guard let count = readStandardInput(into: buffer) else {
                // Nothing was read: the full kc reads standard input as it came, and meets the error.
                CoreDumps.restore(callersLimit)
                return
            }
            let value = UnsafeMutableRawBufferPointer(start: base, count: count)
            // An empty value or one NUL byte takes a new key (Sources/Keyrings/ItemValue.swift): the full kc's.
            if !value.isEmpty && !(value.count == 1 && value[0] == 0) && value.count <= Int(sysconf(Int32(_SC_PAGESIZE))),
               hasNoVaultOutsideNamespaces(checkingStash: false), Vault.stashIsAbsent,
               case .found(let ring) = ServiceKeyringProbe.find(service, prefix: "kc:", under: KEY_SPEC_SESSION_KEYRING),
               case .found(let key) = KernelSearch(in: ring, type: "user", description: item),
               DeadlineRecords.certainlyNone(for: key),
               keyctl_update(key, UnsafeRawPointer(base), value.count) == 0 {
                explicit_bzero(base, value.count)
                exit(0)
            }
            // A failed update changed nothing: the full kc makes its store from the start.
            handOver(value, callersLimit: callersLimit)
        }
    }

    /// Reads standard input to its end into `buffer` (one byte over the most an item
    /// holds at most), as the full kc's `readStandardInput` reads it; the count read.
    /// Nil for a read error before any byte (standard input is then as it came); after
    /// some bytes such an error ends the command with the full kc's message for it.
    private func readStandardInput(into buffer: UnsafeMutableRawBufferPointer) -> Int? {
        guard let base = buffer.baseAddress else { return nil }
        var count = 0
        while count < buffer.count {
            let got = read(0, base + count, buffer.count - count)
            if got < 0 {
                if CKeyutils_errno() == EINTR { continue }
                if count == 0 { return nil }
                explicit_bzero(base, count)
                StandardStream.report("kc: cannot read standard input; pipe the value in, e.g. printf '%s' \"$V\" | kc set SERVICE KEY\n")
                exit(2)
            }
            if got == 0 { break }
            count += got
        }
        return count
    }

    /// Puts `value` in a memory file that becomes standard input, so that the full kc
    /// reads exactly these bytes and then the end, as it would have read them itself;
    /// then main() runs the full kc. If that cannot be done the value would be lost:
    /// the command fails, having stored nothing.
    private func handOver(_ value: UnsafeMutableRawBufferPointer, callersLimit: rlimit) {
        let error = StandardInput.replace(with: UnsafeRawBufferPointer(value))
        if let base = value.baseAddress { explicit_bzero(base, value.count) }
        if let error {
            StandardStream.report("kc: cannot hand the value to the full kc: ", strerror(error), "; nothing was stored\n")
            exit(2)
        }
        CoreDumps.restore(callersLimit)
    }
}

/// The deadline records the full kc keeps for items it gave a lifetime
/// (Sources/KernelKeychain/Placement/DeadlineRecords.swift).
enum DeadlineRecords {
    /// True only if the key certainly has no record: the user keyring holds no
    /// `kc.expiry` keyring, or that keyring no key named by the item's serial. Anything
    /// else (a record, a search refused) is the full kc's to read.
    static func certainlyNone(for key: Int32) -> Bool {
        switch KernelSearch(in: KEY_SPEC_USER_KEYRING, type: "keyring", description: "kc.expiry") {
        case .absent: return true
        case .uncertain: return false
        case .found(let table):
            var name = ByteText()
            name.append(decimal: UInt64(UInt32(bitPattern: key)))
            if case .absent = name.withCString({ KernelSearch(in: table, type: "user", description: $0) }) { return true }
            return false
        }
    }
}

/// Standard input as the full kc will read it after a hand-over.
enum StandardInput {
    /// Makes `bytes` the whole of standard input, so that the full kc reads exactly them
    /// and then the end: a pipe holding them with its writing end closed, where the pipe
    /// can hold them all; else a memory file (`memfd_create`, never on a disk) read from
    /// its start. A pipe comes first because a file is subject to the caller's file size
    /// limit (`ulimit -f`: SIGXFSZ) and to seccomp filters that allow the keyring calls
    /// but not memfd_create, where the full kc itself would store the value (found by a
    /// hostile review). The errno if neither could be made (no memory or no descriptor to
    /// spare), else nil.
    static func replace(with bytes: UnsafeRawBufferPointer) -> Int32? {
        if replaceWithPipe(bytes) { return nil }
        return replaceWithMemoryFile(bytes)
    }

    private static func replaceWithPipe(_ bytes: UnsafeRawBufferPointer) -> Bool {
        var ends: (Int32, Int32) = (-1, -1)
        let made = withUnsafeMutablePointer(to: &ends) {
            $0.withMemoryRebound(to: Int32.self, capacity: 2) { CKeyutils_pipe($0) == 0 }
        }
        guard made else { return false }
        defer { close(ends.0) }
        // A pipe that can hold every byte takes them without blocking (it is empty).
        let holds = CKeyutils_pipe_capacity(ends.1, Int32(clamping: bytes.count)) >= bytes.count
        let written = holds && StandardStream.write(bytes, to: ends.1)
        close(ends.1)
        return written && dup2(ends.0, 0) == 0
    }

    private static func replaceWithMemoryFile(_ bytes: UnsafeRawBufferPointer) -> Int32? {
        // The caller's file size limit, and SIGXFSZ's disposition, as they came for the
        // full kc; meanwhile a write past the limit fails (EFBIG) rather than kills.
        let size = __rlimit_resource_t(RLIMIT_FSIZE.rawValue)
        var callers = rlimit()
        let limited = getrlimit(size, &callers) == 0 && callers.rlim_cur != callers.rlim_max
        if limited {
            var raised = callers
            raised.rlim_cur = callers.rlim_max
            _ = setrlimit(size, &raised)
        }
        var disposition = sigaction()
        let ignored = CKeyutils_ignore_file_size_signal(&disposition) == 0
        let copy = CKeyutils_memfd("kc-input")
        let placed = copy >= 0 && StandardStream.write(bytes, to: copy) && lseek(copy, 0, SEEK_SET) == 0 && dup2(copy, 0) == 0
        let error = CKeyutils_errno()
        if copy >= 0 { close(copy) }
        if ignored { _ = CKeyutils_restore_file_size_signal(&disposition) }
        if limited { _ = setrlimit(size, &callers) }
        return placed ? nil : error
    }
}
