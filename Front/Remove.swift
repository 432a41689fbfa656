import CFront

/// `kc rm [--] SERVICE ITEM` with names the full kc takes as they are, served where the
/// item has one copy and there is no vault.
///
/// The full kc (Sources/kc/Remove.swift, `removeItem`; Sources/KernelKeychain:
/// `Keychain.remove` → `OwnService.remove`) finds, with no vault to journal the removal
/// in, the service's keyrings linked directly in each anchor (the probe of every level a
/// miss makes), searches each for the `user` key ITEM, unlinks each copy found, drops the
/// copies' deadline records, prints nothing, and then removes the service if that left
/// every keyring of it empty (`removeServiceIfEmpty`). The front does the same where
/// there is exactly one copy. Where a keyring is left with keys, that is the end; where
/// none is, the emptiness is the full kc's to settle: the front executes it with its
/// hidden `---remove-service-if-empty SERVICE`, which runs that same code and exits 0
/// silently, as `kc rm` would have. Anything else (a vault, no copy, two copies, a
/// keyring to repair, an unlink refused) is handed over before the kernel was changed.
struct PlainRemove {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard let line = plainNames(argc: argc, argv: argv, command: "rm", count: 2, takesQuiet: false) else { return nil }
        service = line.names[0]
        item = line.names[1]
    }

    /// Removes the item and exits 0 (or has the full kc remove the service it emptied);
    /// otherwise returns, having changed nothing.
    func serveIfOneCopy(argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                        environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard hasNoVaultOutsideNamespaces(checkingStash: false), Vault.stashIsAbsent else { return }
        var copies: [(ring: key_serial_t, item: key_serial_t)] = []
        let certain = ServiceKeyrings.probe(service) { ring, linkedDirectly in
            guard linkedDirectly else { return true }  // found again under its own anchor
            switch Search(in: ring, type: "user", description: item) {
            case .found(let key): copies.append((ring, key))
            case .absent: break
            case .uncertain: return false
            }
            return true
        }
        guard certain, copies.count == 1, keyctl_unlink(copies[0].item, copies[0].ring) == 0 else { return }
        DeadlineRecords.forget(copies[0].item)
        if Self.anyKeyLeft(in: service) { exit(0) }
        FullKC.removeServiceIfEmpty(service, argv: argv, environment: environment)
    }

    /// Whether some keyring of the service, linked directly in its anchor, still holds a
    /// key (`OwnService.removeIfEmpty`'s first look). False also when that cannot be told.
    private static func anyKeyLeft(in service: UnsafePointer<CChar>) -> Bool {
        var found = false
        _ = ServiceKeyrings.probe(service) { ring, linkedDirectly in
            if linkedDirectly, let keys = ServiceKeyrings.linkedKeys(of: ring), !keys.isEmpty { found = true }
            return !found
        }
        return found
    }
}

extension DeadlineRecords {
    /// Drops the record of a removed item, if there is one (`DeadlineRecords.forget`:
    /// every failure ignored, as there).
    static func forget(_ key: key_serial_t) {
        guard case .found(let table) = Search(in: KEY_SPEC_USER_KEYRING, type: "keyring", description: "kc.expiry") else { return }
        var name = CText()
        name.append(decimal: UInt64(UInt32(bitPattern: key)))
        if case .found(let record) = name.withCString({ Search(in: table, type: "user", description: $0) }) {
            _ = keyctl_unlink(record, table)
        }
    }
}
