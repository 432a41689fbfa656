import Age

// The vault's and the host's age keys for other age programs (sops, age itself): the
// recipient to encrypt for, and the identity to decrypt with, handed over a pipe.

extension Vault {
    /// The vault's age recipient (`age1…`): public, for encrypting to this vault
    /// (`sops --age`, a fleet repository's `.sops.yaml`, `age -r`).
    public func ageRecipient() throws(KeychainError) -> String {
        guard exists else { throw .vaultNotInitialized(path: path) }
        return try recipient().encoded
    }

    /// Calls `body` with the vault's age identity (`AGE-SECRET-KEY-1…`, no newline)
    /// while the vault is unlocked (the identity is in the user keyring); nil while it
    /// is locked. The bytes are zeroed afterwards.
    public func withAgeIdentity<R>(_ body: ([UInt8]) -> R) throws(KeychainError) -> R? {
        guard exists else { throw .vaultNotInitialized(path: path) }
        guard let identity = VaultKeys.stashed(for: directory) else { return nil }
        var text = Array(identity.encoded.utf8)
        defer { text.overwriteWithZeros() }
        return body(text)
    }
}

extension HostKey {
    /// The host key's age recipient, if root made one (`kc vault host-init`).
    public static var ageRecipient: String? { VaultKeys.hostRecipient()?.encoded }

    /// Calls `body` with the host's age identity; root only.
    public static func withAgeIdentity<R>(_ body: ([UInt8]) -> R) throws(KeychainError) -> R {
        let identity = try identity()
        var text = Array(identity.encoded.utf8)
        defer { text.overwriteWithZeros() }
        return body(text)
    }
}
