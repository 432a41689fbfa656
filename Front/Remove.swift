import CKeyutils

/// `kc rm [--] SERVICE ITEM` with names the full kc takes as they are, served where the
/// item has one copy and there is no vault.
///
/// The full kc (Sources/kc/Remove.swift, `removeItem`; Sources/KernelKeychain:
/// `Keychain.remove` → `OwnService.remove`) finds, with no vault to journal the removal
/// in, the service's keyrings linked directly in each anchor (the probe of every level a
/// miss makes), searches each for the `user` key ITEM, unlinks each copy found, drops the
/// copies' deadline records, and prints nothing; the service stays, even emptied (no
/// door removes a service with its last item). The front does the same where there is
/// exactly one copy. Anything else (a vault, no copy, two copies, a keyring to repair,
/// an unlink refused) is handed over before the kernel was changed.
struct PlainRemove {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard let line = plainNames(argc: argc, argv: argv, command: "rm", count: 2, takesQuiet: false) else { return nil }
        service = line.names[0]
        item = line.names[1]
    }

    /// Removes the item and exits 0; otherwise returns, having changed nothing.
    func serveIfOneCopy() {
        guard hasNoVaultOutsideNamespaces(checkingStash: false), Vault.stashIsAbsent else { return }
        var copies: [(ring: Int32, item: Int32)] = []
        let certain = ServiceKeyringProbe.probe(service) { ring, linkedDirectly in
            guard linkedDirectly else { return true }  // found again under its own anchor
            switch KernelSearch(in: ring, type: "user", description: item) {
            case .found(let key): copies.append((ring, key))
            case .absent: break
            case .uncertain: return false
            }
            return true
        }
        guard certain, copies.count == 1, keyctl_unlink(copies[0].item, copies[0].ring) == 0 else { return }
        DeadlineRecords.forget(copies[0].item)
        exit(0)
    }
}

extension DeadlineRecords {
    /// Drops the record of a removed item, if there is one (`DeadlineRecords.forget`:
    /// every failure ignored, as there).
    static func forget(_ key: Int32) {
        guard case .found(let table) = KernelSearch(in: KEY_SPEC_USER_KEYRING, type: "keyring", description: "kc.expiry") else { return }
        var name = ByteText()
        name.append(decimal: UInt64(UInt32(bitPattern: key)))
        if case .found(let record) = name.withCString({ KernelSearch(in: table, type: "user", description: $0) }) {
            _ = keyctl_unlink(record, table)
        }
    }
}
