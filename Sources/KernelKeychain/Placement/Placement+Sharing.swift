import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

// Sharing's kernel side: a sharing applied to whole service keyrings and their items.

extension Placement {
    /// Shares each ring (items, keyring, then the items again, for any a concurrent
    /// write added in between) or unshares them (every keyring, every keyring again for
    /// any a concurrent write made join, then the items). With the re-checks in
    /// ``set(_:forKey:)`` and the second pass of ``share(with:writable:)`` and
    /// ``unshare()`` over freshly listed keyrings, every item ends up shared exactly as
    /// its keyring (`SharingLibraryTests` races writers at two levels against both).
    static func apply(_ sharing: Sharing?, to rings: [KeySerial]) throws(KeychainError) {
        do throws(KeyctlError) {
            if let sharing {
                for ring in rings {
                    try ignoringGone { () throws(KeyctlError) in
                        try applyToItems(sharing, in: ring)
                        try Sharing.apply(sharing, to: ring, as: .keyring)
                        try applyToItems(sharing, in: ring)
                    }
                }
            } else {
                for _ in 0..<2 {
                    for ring in rings { try ignoringGone { () throws(KeyctlError) in try Sharing.apply(nil, to: ring, as: .keyring) } }
                }
                for ring in rings { try ignoringGone { () throws(KeyctlError) in try applyToItems(nil, in: ring) } }
            }
        } catch {
            throw KeychainError(error)
        }
    }

    /// Runs `body`, treating a key that vanished meanwhile as done.
    private static func ignoringGone(_ body: () throws(KeyctlError) -> Void) throws(KeyctlError) {
        do {
            try body()
        } catch {
            if !error.meansKeyIsGone { throw error }
        }
    }

    /// The items get the sharing; a key of another uid's found in the caller's keyring
    /// is unlinked rather than stopping a share or unshare for good.
    private static func applyToItems(_ sharing: Sharing?, in ring: KeySerial) throws(KeyctlError) {
        for item in try ring.linkedKeys() {
            do {
                guard let info = try? item.describe(), info.uid == geteuid() else {
                    try? item.unlink(from: ring)
                    continue
                }
                guard info.type == "user" else { continue }
                try Sharing.apply(sharing, to: item, as: .item)
            } catch {
                if !error.meansKeyIsGone { throw error }
            }
        }
    }
}
