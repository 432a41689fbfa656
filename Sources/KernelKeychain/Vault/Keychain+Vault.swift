import Keyrings

/// How `Keychain`'s writes keep the vault in step (see ``Vault``).
extension Keychain {
    /// Runs a kernel change under the vault's lock, then `update` with the vault;
    /// without a vault, only the change.
    internal func changingVault<R>(_ change: () throws(KeychainError) -> R,
                                   then update: (Vault, R) throws(KeychainError) -> R) throws(KeychainError) -> R {
        guard let vault = try Vault.forWriting() else { return try change() }
        return try vault.directory.withLock { () throws(KeychainError) in
            let result = try VaultHooks.suspended(change)
            return try update(vault, result)
        }
    }

    /// Runs a change to existing items (a level move, a new deadline, a rename); if it
    /// changed something and the vault held any of `items`, each of them is written
    /// again from what the kernel holds afterwards (a renamed item's old file goes).
    /// Items the vault did not hold (stored `--ephemeral`) stay out of it.
    internal func keepingVaultInStep<R>(items: [(service: KeyName, name: KeyName)], changed: (R) -> Bool,
                                        _ change: () throws(KeychainError) -> R) throws(KeychainError) -> R {
        try changingVault(change) { vault, result throws(KeychainError) in
            guard changed(result), items.contains(where: { !vault.levels(ofItem: $0.name, in: $0.service).isEmpty }) else { return result }
            for item in items { try vault.rewriteFromKernel(item.name, in: item.service) }
            return result
        }
    }

    /// On a read that missed in the kernel: if the vault holds the item and is
    /// unlocked, it is loaded again (the persistent keyring expired, or a new login
    /// session) and found; if the vault is locked, that is the error. Only a miss pays
    /// for this: without a vault, a `stat` of HOME and an `lstat` of where the vault would be.
    internal func reloadedFromVault(_ key: KeyName, in scope: Scope) throws(KeychainError) -> (ring: KeySerial, item: KeySerial)? {
        guard case .own(let service) = scope, let vault = try Vault.forWriting(),
              !vault.levels(ofItem: key, in: service).isEmpty
        else { return nil }
        guard try vault.reload(key, in: service) else {
            throw .vaultLocked(service: service.description, item: key.description)
        }
        return try VaultHooks.suspended { () throws(KeychainError) in try locate(key, in: scope) }
    }
}
