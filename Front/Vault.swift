import CKeyutils

/// Whether the caller has no vault, decided as the full kc decides it
/// (Sources/KernelKeychain/Persistence/Vault: `VaultDirectory.defaultRoot()` and
/// `exists`). With no vault, a miss in the kernel is final and a listing loads nothing;
/// with one, or where the front cannot be sure, the full kc decides.
enum Vault {
    /// The vault's folder, from the environment (the core's ``VaultLocation``, which the
    /// full kc asks first). Nil where the full kc would look the home folder up in the
    /// password database: that is the full kc's to do.
    static var defaultRoot: ByteText? {
        VaultLocation.rootFromEnvironment.map { ByteText($0) }
    }

    /// True only if nothing at all is at the vault's path: the full kc opens it
    /// (`O_PATH | O_NOFOLLOW`) to tell whether a vault exists, and the front takes only
    /// ENOENT as "none" (any other failure is left to the full kc).
    static func isAbsent(at root: ByteText) -> Bool {
        root.withCString { path in
            let descriptor = CKeyutils_open_path(path)
            if descriptor >= 0 {
                close(descriptor)
                return false
            }
            return CKeyutils_errno() == ENOENT
        }
    }

    /// What a listing asks besides (`Vault.forWriting()`): whether the vault's key is
    /// stashed in the user keyring although its folder is gone. Either answer leaves the
    /// listing as the kernel has it; only a search the kernel refuses would make the
    /// full kc link the user keyring to search again, so that is uncertain.
    static func stashSearchIsPlain(at root: ByteText) -> Bool {
        if case .uncertain = stashSearch(at: root) { return false }
        return true
    }

    /// For a write (`Vault.forWriting()`): true only if the search for the vault's key
    /// stashed in the user keyring finds none. A stash without the folder makes the full
    /// kc refuse the write (the vault is missing); a refused search is its to retry.
    static var stashIsAbsent: Bool {
        guard let root = defaultRoot, case .absent = stashSearch(at: root) else { return false }
        return true
    }

    /// The full kc's search for the vault's stashed key (`VaultKeys.isStashed`).
    private static func stashSearch(at root: ByteText) -> KernelSearch {
        ByteText(VaultLocation.stashDescription(root: root.bytes)).withCString {
            KernelSearch(in: KEY_SPEC_USER_KEYRING, type: "user", description: $0)
        }
    }
}
