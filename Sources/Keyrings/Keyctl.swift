import SystemPackage

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Public throwing API over the trampolines in Internals/Syscalls.swift. Each method
// names the kernel call underneath and the permission the caller needs.

extension KeySerial {
    /// Adds a key of `type` to `keyring`, or updates the payload of the key of that type
    /// and description already linked there (atomically, keeping its serial).
    /// For type `keyring`, an existing keyring of the same description is *displaced*.
    ///
    /// Needs write permission on `keyring`. The corresponding C function is `add_key`.
    public static func add(
        type: String, description: KeyName, payload: UnsafeRawBufferPointer?, into keyring: KeySerial
    ) throws(KeyctlError) -> KeySerial {
        let result = type.withCString { type in
            description.withCString { description in
                keyctlResult {
                    system_add_key(type, description, payload?.baseAddress, payload?.count ?? 0, keyring.rawValue)
                }
            }
        }
        return try KeySerial(rawValue: result.get(call: "add_key"))
    }

    /// Searches this keyring and the keyrings nested in it for a key of `type` whose
    /// description is exactly `description`. A key linked directly in this keyring is
    /// found before any nested one. Returns nil when there is none, or when the only
    /// match has expired or been revoked.
    ///
    /// Needs search permission on the keyrings and the key. The corresponding C
    /// function is `keyctl_search`.
    public func search(type: String, description: KeyName) throws(KeyctlError) -> KeySerial? {
        let result = type.withCString { type in
            description.withCString { description in
                keyctlResult { system_keyctl_search(rawValue, type, description, 0) }
            }
        }
        switch result {
        case .success(let serial): return KeySerial(rawValue: Int32(truncatingIfNeeded: serial))
        case .failure(let errno):
            let error = KeyctlError(errno, call: "keyctl_search")
            if error.meansKeyIsGone { return nil }
            throw error
        }
    }

    /// Reads the payload (for a keyring: the serials linked in it) and hands it to
    /// `body`. The buffer is zeroed before this returns, so a secret does not outlive
    /// the call unless `body` copies it.
    ///
    /// The length is probed as `keyctl` does: read with a guess, and if the kernel
    /// reports more, grow and read again, trusting the last length.
    /// Needs read permission (or search on a possessed keyring). The corresponding C
    /// function is `keyctl_read`.
    public func withPayload<R>(
        sizeHint: Int = 4096, _ body: (UnsafeRawBufferPointer) -> R
    ) throws(KeyctlError) -> R {
        var capacity = Swift.max(sizeHint, 1)
        while true {
            // malloc itself: Swift's allocate goes through posix_memalign, which costs
            // a short read about as much again as malloc's per-thread cache.
            guard let start = malloc(capacity) else { throw KeyctlError(.noMemory, call: "keyctl_read") }
            let buffer = UnsafeMutableRawBufferPointer(start: start, count: capacity)
            var written = 0
            defer {
                // Only the bytes the kernel wrote can hold the secret.
                UnsafeMutableRawBufferPointer(rebasing: buffer[..<written]).initializeMemory(as: UInt8.self, repeating: 0)
                free(start)
            }
            let length = try Int(keyctlResult {
                system_keyctl_read(rawValue, buffer.baseAddress, capacity)
            }.get(call: "keyctl_read"))
            written = Swift.min(length, capacity)
            if length <= capacity {
                return body(UnsafeRawBufferPointer(rebasing: buffer[..<length]))
            }
            capacity = length
        }
    }

    /// The payload's bytes. The caller owns the copy and should zero it when done.
    ///
    /// The corresponding C function is `keyctl_read`.
    public func read(sizeHint: Int = 4096) throws(KeyctlError) -> [UInt8] {
        try withPayload(sizeHint: sizeHint) { Array($0) }
    }

    /// The payload's length in bytes, read without copying the payload.
    ///
    /// The corresponding C function is `keyctl_read` with an empty buffer.
    public func payloadSize() throws(KeyctlError) -> Int {
        try Int(keyctlResult { system_keyctl_read(rawValue, nil, 0) }.get(call: "keyctl_read"))
    }

    /// The serials linked in this keyring, in the kernel's order.
    ///
    /// Needs read permission on the keyring. The corresponding C function is `keyctl_read`.
    public func linkedKeys() throws(KeyctlError) -> [KeySerial] {
        try withPayload(sizeHint: 64 * MemoryLayout<Int32>.size) { bytes in
            bytes.withMemoryRebound(to: Int32.self) { $0.map(KeySerial.init(rawValue:)) }
        }
    }

    /// Type, owner, permissions and description of the key.
    ///
    /// Needs view permission. The corresponding C function is `keyctl_describe`.
    public func describe() throws(KeyctlError) -> KeyDescription {
        var capacity = 256
        while true {
            let buffer = UnsafeMutableBufferPointer<CChar>.allocate(capacity: capacity)
            defer { buffer.deallocate() }
            let length = try Int(keyctlResult {
                system_keyctl_describe(rawValue, buffer.baseAddress, capacity)
            }.get(call: "keyctl_describe"))
            if length <= capacity {
                // The kernel counts the terminating NUL in `length`.
                let bytes = UnsafeRawBufferPointer(rebasing: UnsafeMutableRawBufferPointer(buffer)[..<Swift.max(length, 0)])
                guard let parsed = KeyDescription(parsingCString: bytes) else {
                    throw KeyctlError(.invalidArgument, call: "keyctl_describe")
                }
                return parsed
            }
            capacity = length
        }
    }

    /// Replaces the key's permission mask.
    ///
    /// Needs setattr permission. The corresponding C function is `keyctl_setperm`.
    public func setPermissions(_ permissions: KeyPermissions) throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_setperm(rawValue, permissions.rawValue) }.get(call: "keyctl_setperm")
    }

    /// Gives the key to another group (its uid is unchanged). An ordinary caller may
    /// only name a group it belongs to; the kernel answers EACCES otherwise.
    ///
    /// Needs setattr permission. The corresponding C function is `keyctl_chown` with
    /// uid -1.
    public func setGroup(_ gid: UInt32) throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_chown(rawValue, UInt32.max, gid) }.get(call: "keyctl_chown")
    }

    /// Replaces the payload of an existing key in place (same serial, owner, group,
    /// permissions and expiry).
    ///
    /// Needs write permission on the key. The corresponding C function is `keyctl_update`.
    public func update(payload: UnsafeRawBufferPointer) throws(KeyctlError) {
        _ = try keyctlResult {
            system_keyctl_update(rawValue, payload.baseAddress, payload.count)
        }.get(call: "keyctl_update")
    }

    /// Sets the key to expire `seconds` from now; 0 removes any expiry.
    ///
    /// Needs setattr permission. The corresponding C function is `keyctl_set_timeout`.
    public func setTimeout(seconds: UInt32) throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_set_timeout(rawValue, seconds) }.get(call: "keyctl_set_timeout")
    }

    /// Links this key into `keyring`.
    ///
    /// Needs link permission on the key and write on the keyring. The corresponding C
    /// function is `keyctl_link`.
    public func link(into keyring: KeySerial) throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_link(rawValue, keyring.rawValue) }.get(call: "keyctl_link")
    }

    /// Unlinks this key from `keyring`; the kernel collects a key nothing links to.
    ///
    /// Needs write permission on the keyring. The corresponding C function is `keyctl_unlink`.
    public func unlink(from keyring: KeySerial) throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_unlink(rawValue, keyring.rawValue) }.get(call: "keyctl_unlink")
    }

    /// Moves the link to this key from one keyring to another in one step. With
    /// `exclusive`, fails with EEXIST rather than displace a key of the same type and
    /// description in `destination`.
    ///
    /// Needs link permission on the key and write on both keyrings. The corresponding
    /// C function is `keyctl_move` (Linux 5.1).
    public func move(from source: KeySerial, to destination: KeySerial, exclusive: Bool) throws(KeyctlError) {
        let flags = exclusive ? system_KEYCTL_MOVE_EXCL : 0
        _ = try keyctlResult {
            system_keyctl_move(rawValue, source.rawValue, destination.rawValue, flags)
        }.get(call: "keyctl_move")
    }

    /// Marks the key invalid; the kernel removes it from every keyring at once.
    ///
    /// Needs search permission. The corresponding C function is `keyctl_invalidate`.
    public func invalidate() throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_invalidate(rawValue) }.get(call: "keyctl_invalidate")
    }

    /// Unlinks everything from this keyring.
    ///
    /// Needs write permission. The corresponding C function is `keyctl_clear`.
    public func clear() throws(KeyctlError) {
        _ = try keyctlResult { system_keyctl_clear(rawValue) }.get(call: "keyctl_clear")
    }

    /// The real serial behind a special keyring id, creating the keyring if asked.
    ///
    /// The corresponding C function is `keyctl_get_keyring_ID`.
    public func resolved(create: Bool = false) throws(KeyctlError) -> KeySerial {
        try KeySerial(rawValue: keyctlResult {
            system_keyctl_get_keyring_ID(rawValue, create)
        }.get(call: "keyctl_get_keyring_ID"))
    }

    /// The uid's persistent keyring, created if needed and linked into `keyring` (which
    /// makes its contents possessed through that keyring). `uid` nil means the caller's.
    ///
    /// Another uid's needs CAP_SETUID. The corresponding C function is
    /// `keyctl_get_persistent` (CONFIG_PERSISTENT_KEYRINGS).
    public static func persistentKeyring(uid: UInt32? = nil, linkedInto keyring: KeySerial) throws(KeyctlError) -> KeySerial {
        let id = uid ?? UInt32.max  // (uid_t)-1: the caller's own
        return try KeySerial(rawValue: Int32(truncatingIfNeeded: keyctlResult {
            system_keyctl_get_persistent(id, keyring.rawValue)
        }.get(call: "keyctl_get_persistent")))
    }

    /// Replaces the calling thread's session keyring: with a name, joins (or creates)
    /// that named keyring; with nil, a new anonymous one. Threads and children created
    /// afterwards inherit it.
    ///
    /// The corresponding C function is `keyctl_join_session_keyring`.
    @discardableResult
    public static func joinSessionKeyring(named name: String? = nil) throws(KeyctlError) -> KeySerial {
        let result: Result<Int32, Errno>
        if let name {
            result = name.withCString { name in keyctlResult { system_keyctl_join_session_keyring(name) } }
        } else {
            result = keyctlResult { system_keyctl_join_session_keyring(nil) }
        }
        return try KeySerial(rawValue: result.get(call: "keyctl_join_session_keyring"))
    }
}

extension Result where Failure == Errno {
    @inline(__always)
    internal func get(call: String) throws(KeyctlError) -> Success {
        switch self {
        case .success(let value): return value
        case .failure(let errno): throw KeyctlError(errno, call: call)
        }
    }
}
