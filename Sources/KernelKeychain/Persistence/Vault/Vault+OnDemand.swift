import Age
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Items coming back from an unlocked vault outside `kc unlock`, when a door finds the
// kernel without them (a new login session, an expired persistent keyring): a read that
// misses (`kc get`, the mount's `cat`) and a listing (`kc ls`, `kc exec`, `kc export`,
// the mount's directories, `allKeys`/`items`/`services`) all load them through
// ``Vault/loadOnDemand(_:)``, so every door shows what the vault holds for this
// session, as `get` does, and which levels a session takes back is decided in one
// place: ``Vault/levelsLoadedOnDemand()``.

extension Vault {
    /// The levels an item may come back at outside an unlock: `after-first-unlock` and
    /// `always` in any process of the user, `when-unlocked` only in a login session that
    /// unlocked (PAM's session step or `kc unlock` marked its session keyring: see
    /// ``LoginSession``), not in cron, a service or a shell outside the login, where it
    /// would outlive the login.
    internal static func levelsLoadedOnDemand() -> Set<Accessibility.Level> {
        LoginSession.isMarked ? Vault.allLevels : [.afterFirstUnlock, .always]
    }

    /// The one way items come back on demand: loads each of `items` that the vault
    /// keeps at a level of ``levelsLoadedOnDemand()`` into the kernel (with the identity
    /// an unlock left in the user keyring), as `kc unlock` loads it; items the kernel
    /// holds meanwhile are left alone. Nil if the vault is locked; else what was done,
    /// file by file where something went wrong.
    internal func loadOnDemand(_ items: [(service: KeyName, name: KeyName)]) throws(KeychainError) -> VaultUnlockReport? {
        guard let identity = VaultKeys.stashed(for: directory) else { return nil }
        let identities = Self.identities(for: identity)
        let levels = Self.levelsLoadedOnDemand()
        return try directory.withLock { _ throws(KeychainError) in
            var report = VaultUnlockReport()
            var shown: [KeySerial: ProcKeysEntry.Expiry]? = nil
            for (service, name) in items {
                let files = Accessibility.allCases.filter { levels.contains($0.level) }
                    .map { ($0, directory.itemFile($0, service, name)) }.filter { directory.isFile($0.1) }
                guard !files.isEmpty else { continue }
                settle(ItemKey(service: service, name: name), files: files, identities: identities, levels: levels,
                       addingHostKey: false, report: &report, shown: &shown)
            }
            return report
        }
    }

    /// The names of the service's items the vault keeps at the levels this process may
    /// load (``levelsLoadedOnDemand()``): file names only, nothing is decrypted.
    private func loadableNames(in service: KeyName, levels: Set<Accessibility.Level>) -> Set<KeyName> {
        var names = Set<KeyName>()
        for accessibility in Accessibility.allCases where levels.contains(accessibility.level) {
            for name in directory.entries(of: directory.serviceFolder(accessibility, service)) { names.insert(KeyName(bytes: name)) }
        }
        return names
    }

    /// For a listing of the caller's own service that found `listed` in the kernel: the
    /// items the vault keeps for this session that the kernel lacks are loaded (names on
    /// disk are compared first, so a listing decrypts nothing when the kernel holds
    /// them all). True if any was loaded: list again. With a locked vault the kernel's
    /// listing stands (the keychain asks only a vault it could write to: an unsafe one,
    /// which `kc unlock` names, is no journal for a listing).
    internal func loadMissing(of service: KeyName, listed: [KeyName]) -> Bool {
        let vault = self
        // The common case, the kernel holding every name on disk, asks nothing more;
        // only then is the session's mark looked up.
        guard !vault.loadableNames(in: service, levels: Self.allLevels).subtracting(listed).isEmpty else { return false }
        let missing = vault.loadableNames(in: service, levels: Self.levelsLoadedOnDemand()).subtracting(listed)
        guard !missing.isEmpty else { return false }
        let report = try? vault.loadOnDemand(missing.sorted().map { (service, $0) })
        return (report?.loadedCount ?? 0) > 0
    }

    /// For a listing of services that found `listed` in the kernel: the services the
    /// vault keeps items of for this session that have no keyring are loaded (as
    /// ``loadMissing(of:listed:)``). True if any item was loaded.
    internal func loadMissingServices(listed: [KeyName]) -> Bool {
        let vault = self
        func services(at levels: Set<Accessibility.Level>) -> Set<KeyName> {
            var services = Set<KeyName>()
            for accessibility in Accessibility.allCases where levels.contains(accessibility.level) {
                for service in vault.directory.entries(of: vault.directory.levelFolder(accessibility)) { services.insert(KeyName(bytes: service)) }
            }
            return services
        }
        // As in ``loadMissing(of:listed:)``: the session's mark only when something is missing.
        guard !services(at: Self.allLevels).subtracting(listed).isEmpty else { return false }
        let levels = Self.levelsLoadedOnDemand()
        let missing = services(at: levels).subtracting(listed).sorted()
        guard !missing.isEmpty else { return false }
        let items = missing.flatMap { service in vault.loadableNames(in: service, levels: levels).sorted().map { (service, $0) } }
        let report = try? vault.loadOnDemand(items)
        return (report?.loadedCount ?? 0) > 0
    }
}
