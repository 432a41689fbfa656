import CKeyutils

// `kc get --group GROUP SERVICE ITEM` and `kc get --from USER SERVICE ITEM` in the front
// (docs/FRONT.md, "A shared service read through --group or --from"): a member reading an
// item of the service another user shares with it, and the caller's own read with either
// option. The full kc's path for --group is
// Sources/kc/FastPath.swift `get()` -> `openKeychain` (the group resolved, the caller in
// it) -> `Keychain.withBytes` -> `sharedService(forWriting: false)` (the caller's own
// service wins; else `SharedServices.visible`, /proc/keys confirmed by describes) ->
// `SharedService.locate` (the keyring's links, each key described) -> one read; for
// --from the same without the caller's own service (`visible(owner:)`). The
// front makes the same read-only calls and serves only where each answer is one the full
// kc takes without a word or a change; anything else (a group it cannot resolve exactly as
// the full kc does, several owners, a miss, a vault, KC_AUDIT, a failed call) is handed
// over before anything changed.

/// `kc get [-q|--quiet] --group GROUP [--] SERVICE ITEM`, or `--from USER` instead of
/// `--group`, in the plain spelling (the core's `PlainCommandLine`, the full kc's reader
/// too): the flag and the option each at most once, anywhere before `--`; the option's
/// value a separate word, not empty and not starting with `-`. Nil for anything else
/// (both options, `--group=G`, a repeated option, names the full kc would refuse or word).
struct SharedGet {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>
    /// Exactly one of the two is given.
    let group: UnsafePointer<CChar>?
    let owner: UnsafePointer<CChar>?
    /// `-q`: changes only what a miss prints, and a miss is handed over.
    let quiet: Bool

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        let quiet: [StaticString] = ["-q", "--quiet"], group: [StaticString] = ["--group"], owner: [StaticString] = ["--from"]
        guard PlainCommandLine.argument(argc: argc, argv: argv, 1, is: "get"),
              let line = PlainCommandLine(argc: argc, argv: argv, from: 2,
                                          .init(flags: [quiet], options: [group, owner], names: 2...2)),
              line.namesAreValid else { return nil }
        // Both options: which one wins is the parser's to say.
        self.group = line.valueWord(group)
        self.owner = line.valueWord(owner)
        guard (self.group == nil) != (self.owner == nil) else { return nil }
        service = line.names[0]
        item = line.names[1]
        self.quiet = line.has(quiet)
    }

    /// Writes the item's value and exits, as the full kc does, when the group resolves
    /// as the full kc resolves it and the caller carries it, and then either the caller's
    /// own service holds the item at home (the full kc reads the caller's own service
    /// whenever it has one), or the caller has no service of that name anywhere, no
    /// vault, and exactly one other user shares a service of that name with the group
    /// that holds the item. Otherwise returns, having changed nothing the full kc could see.
    func serveIfCertain() {
        // Inside a user namespace owners show through its map (or as the overflow uid):
        // the full kc's to judge.
        guard InitialUserNamespace.contains == true else { return }
        if let owner { return serveIfCertain(from: owner) }
        // `AccessGroup(named:)`, then `requireCaller()`.
        guard let group, let gid = AccountFiles.certainGID(named: group), CallerGroups.include(gid) else { return }
        // `serviceExists()` first: its first call is the home search a plain get makes,
        // so a hit at home is the plain get's, to the byte.
        PlainGet(service: service, item: item, quiet: quiet).serveIfAtHome()
        // The rest of `serviceExists()`: every level probed, nothing of the caller's
        // found, and no vault that could load one (`Vault.loadMissing`, whose
        // `Vault.forWriting()` also searches the user keyring for the vault's stashed
        // key: a refused search would make it link the user keyring, so that search must
        // answer plainly, found or not, as for a listing).
        guard hasNoVaultOutsideNamespaces(checkingStash: true),
              ServiceKeyringProbe.probe(service, { _, _ in false }),
              let shared = SharedServiceRings.find(service, gid: gid, owner: nil),
              let key = shared.item(named: item) else { return }
        ValueOutput.writeAndExit(key)
    }

    /// `--from USER`: the user resolved as the full kc resolves a name
    /// (`Accounts.uid(ofUserNameOrNumber:)`, by name: a number /etc/passwd does not name
    /// is handed over). The caller's own uid reads the caller's own service as a plain get
    /// (`sharedService` returns nil for it). Another user's is found directly, with no look
    /// at the caller's own service or the vault (the full kc makes neither when an owner
    /// is named): the one service of that name and owner shared through a group the
    /// caller carries, and the item in it.
    private func serveIfCertain(from owner: UnsafePointer<CChar>) {
        guard let uid = AccountFiles.certainUID(named: owner) else { return }
        if uid == geteuid() {
            PlainGet(service: service, item: item, quiet: quiet).serveIfAtHome()
            return
        }
        guard let shared = SharedServiceRings.find(service, gid: nil, owner: UInt64(uid)),
              let key = shared.item(named: item) else { return }
        ValueOutput.writeAndExit(key)
    }
}

extension PlainGet {
    /// The plain get of the same names (for the caller's own service reached with --group).
    init(service: UnsafePointer<CChar>, item: UnsafePointer<CChar>, quiet: Bool) {
        self.service = service
        self.item = item
        self.quiet = quiet
    }
}

/// The keyrings of the one service another user shares with the group, found as the
/// full kc finds them (`SharedServices.visible(service:group:)`): the lines of
/// /proc/keys that name another uid's keyring whose description starts `kc:` or
/// `kc.local:`, each confirmed with `keyctl_describe` (a keyring, that uid's, this
/// service's, the group's, with view and read for the group).
struct SharedServiceRings {
    var owner: UInt64
    var rings: [Int32]

    /// Nil unless exactly one owner shares the service with the group and every line and
    /// describe was read as the full kc reads it:
    /// - /proc/keys holds only printable ASCII and newlines (the lines the full kc shows
    ///   and matches are then the bytes);
    /// - no keyring is named twice (a description holding a newline can forge a line);
    /// - each describe of a candidate succeeds (the full kc skips one that fails; the
    ///   front leaves that race to it).
    /// The lines are the core's ``ProcKeysLine``, as the full kc's
    /// (`SharedServices.candidates`). `gid`: only a keyring of that group's (`--group`);
    /// else any group the caller carries. `owner`: only that uid's lines (`--from`; others
    /// are not even described).
    static func find(_ service: UnsafePointer<CChar>, gid: UInt32?, owner: UInt64?) -> SharedServiceRings? {
        guard let text = FileBytes.read("/proc/keys", followingLinks: false, limit: 64 << 20) else { return nil }
        for byte in text where byte != UInt8(ascii: "\n") && (byte < 0x20 || byte > 0x7e) { return nil }
        let me = geteuid()
        var found: SharedServiceRings? = nil
        var candidates: [Int32] = []
        var certain = true
        text.withUnsafeBytes { text in
            ProcKeysLine.forEach(in: text) { line in
                guard line.isServiceKeyring(in: text), line.uid != me, owner == nil || owner == UInt64(line.uid) else { return true }
                let serial = Int32(bitPattern: line.serial)
                guard !candidates.contains(serial) else {
                    certain = false
                    return false
                }
                candidates.append(serial)
                switch Self.confirm(serial, uid: line.uid, service: service, gid: gid) {
                case .uncertain:
                    certain = false
                    return false
                case .other: return true
                case .shared:
                    if var known = found {
                        guard known.owner == UInt64(line.uid) else {  // several owners: the full kc's error
                            certain = false
                            return false
                        }
                        known.rings.append(serial)
                        found = known
                    } else {
                        found = SharedServiceRings(owner: UInt64(line.uid), rings: [serial])
                    }
                    return true
                }
            }
        }
        return certain ? found : nil
    }

    private enum Confirmation { case shared, other, uncertain }

    /// The full kc's checks of one candidate, on its `keyctl_describe`.
    private static func confirm(_ ring: Int32, uid: UInt32, service: UnsafePointer<CChar>, gid: UInt32?) -> Confirmation {
        KeyDescribe.read(ring) { fields, text -> Confirmation in
            let description = UnsafeRawBufferPointer(rebasing: text[fields.descriptionOffset..<(text.count - 1)])
            guard let shared = SharedServiceKeyring(isKeyring: fields.hasType("keyring", in: text), uid: fields.uid, gid: fields.gid,
                                                    permissions: fields.permissions, description: description, owner: uid)
            else { return .other }
            // (`service == name`, `gid == nil || gid == info.gid`, `callerGroups.contains(info.gid)`.)
            guard strcmp(text.cString(at: fields.descriptionOffset + shared.nameOffset), service) == 0,
                  gid.map({ $0 == shared.gid }) ?? true, CallerGroups.include(shared.gid) else { return .other }
            return .shared
        } ?? .uncertain
    }

    /// The owner's `user` key named `item` in the first of the rings that holds one, as
    /// `SharedService.locate` finds it (members may not search: each keyring's links,
    /// then each key described; a key that cannot be described is passed over, as the
    /// full kc passes it). Nil for a miss or anything the full kc would report.
    func item(named item: UnsafePointer<CChar>) -> Int32? {
        for ring in rings {
            guard let keys = ServiceKeyringProbe.linkedKeys(of: ring) else { return nil }
            for key in keys {
                let matches: Bool? = KeyDescribe.read(key) { fields, text in
                    fields.hasType("user", in: text) && UInt64(fields.uid) == owner
                        && strcmp(text.cString(at: fields.descriptionOffset), item) == 0
                }
                if matches == true { return key }  // not described: passed over
            }
        }
        return nil
    }
}
