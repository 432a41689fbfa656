import CFront

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
/// `--group`, read as the full kc's plain spelling reads it
/// (Sources/kc/PlainCommandLine.swift): the flag and the option each at most once,
/// anywhere before `--`; the option's value a separate word, not empty and not starting
/// with `-`. Nil for anything else (both options, `--group=G`, a repeated option, names
/// the full kc would refuse or word).
struct SharedGet {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>
    /// Exactly one of the two is given.
    let group: UnsafePointer<CChar>?
    let owner: UnsafePointer<CChar>?
    /// `-q`: changes only what a miss prints, and a miss is handed over.
    let quiet: Bool

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard argc >= 2, let command = argv[1], strcmp(command, "get") == 0 else { return nil }
        var names: [UnsafePointer<CChar>] = []
        var group: UnsafePointer<CChar>? = nil, owner: UnsafePointer<CChar>? = nil
        var quiet = false, optionsEnded = false
        var index = 2
        while index < Int(argc) {
            guard let word = argv[index].map({ UnsafePointer($0) }) else { return nil }
            index += 1
            if optionsEnded || word[0] != CChar(UInt8(ascii: "-")) {
                guard names.count < 2, isPlainName(word) else { return nil }
                names.append(word)
            } else if strcmp(word, "--") == 0 {
                optionsEnded = true
            } else if !quiet && (strcmp(word, "-q") == 0 || strcmp(word, "--quiet") == 0) {
                quiet = true
            } else if (group == nil && strcmp(word, "--group") == 0) || (owner == nil && strcmp(word, "--from") == 0) {
                guard index < Int(argc), let value = argv[index].map({ UnsafePointer($0) }),
                      value[0] != 0, value[0] != CChar(UInt8(ascii: "-")) else { return nil }
                if word[2] == CChar(UInt8(ascii: "g")) { group = value } else { owner = value }
                index += 1
            } else {
                return nil  // --group=G, a repeated flag or option, --help, ...
            }
        }
        // Both options: which one wins is the parser's to say.
        guard names.count == 2, (group == nil) != (owner == nil) else { return nil }
        service = names[0]
        item = names[1]
        self.group = group
        self.owner = owner
        self.quiet = quiet
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
        guard UserNamespace.isInitial else { return }
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
              ServiceKeyrings.probe(service, { _, _ in false }),
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

/// The caller's groups as the kernel checks them and the full kc reads them
/// (`AccessGroup.includesCaller`): the effective gid and the supplementary ones.
enum CallerGroups {
    static func include(_ gid: UInt32) -> Bool {
        if getegid() == gid { return true }
        let count = getgroups(0, nil)
        guard count > 0 else { return false }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = groups.withUnsafeMutableBufferPointer { getgroups(count, $0.baseAddress) }
        return filled > 0 && groups[0..<Int(filled)].contains(gid)
    }
}

/// The group a name means to the full kc (`Accounts.gid(ofGroup:)`), or the user
/// (`Accounts.uid(ofUser:)`), where that is certain whichever full kc is beside the
/// front: the static one (the release build; also a dynamic one whose process is already
/// undumpable, which cannot read /proc/self/auxv) reads /etc/group or /etc/passwd itself
/// and takes the first record of that name (`LocalDatabase`); a dynamic one asks the C
/// library, whose NSS asks the sources nsswitch.conf lists. Both give the same id when
/// the file answers unambiguously and is asked first:
/// - the name is plain ASCII (`!`..`~`, no `:`, not starting with `+`, `-` or `#`), so
///   Swift's string equality is byte equality;
/// - nsswitch.conf has one line for the database and it begins with `files` with no
///   action after it (files answers first, and a name it finds is final), and no nscd
///   socket exists (nscd answers before files, from its cache);
/// - the file (not a link: the static kc does not follow one) holds only printable ASCII
///   and newlines (so Swift's lines and fields are the bytes' and glibc's), no line
///   starts with a space (glibc skips it, the static kc keeps it), and exactly one line is
///   a record of that name, with enough fields for both readers and its numeric fields
///   plain digits below 2^32 - 1 (read alike by `UInt32(_:)` and glibc's `strtoul`).
/// Otherwise nil: a name the file lacks (the full kc then takes a number as an id, or
/// asks NSS's next source, or says it is unknown), or any doubt, is the full kc's.
enum AccountFiles {
    /// `NAME:PASSWORD:GID[:MEMBERS]`.
    static func certainGID(named name: UnsafePointer<CChar>) -> UInt32? {
        certainID(named: name, database: "group", path: "/etc/group", minimumFields: 3, numericFields: 2...2)
    }

    /// `NAME:PASSWORD:UID:GID:GECOS:HOME[:SHELL]` (the static kc needs six fields and a
    /// numeric gid as well).
    static func certainUID(named name: UnsafePointer<CChar>) -> UInt32? {
        certainID(named: name, database: "passwd", path: "/etc/passwd", minimumFields: 6, numericFields: 2...3)
    }

    /// Field 2 of the one record named `name`.
    private static func certainID(named name: UnsafePointer<CChar>, database: StaticString, path: StaticString,
                                  minimumFields: Int, numericFields: ClosedRange<Int>) -> UInt32? {
        guard isPlainAccountName(name), NameServiceSwitch.asksFilesFirst(for: database), !NameServiceSwitch.hasCache,
              let text = FileBytes.read(path, followingLinks: false, limit: 1 << 22) else { return nil }
        for byte in text where byte != UInt8(ascii: "\n") && (byte < 0x20 || byte > 0x7e) { return nil }
        let nameLength = strlen(name)
        var found: UInt32? = nil
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            defer { start = end + 1 }
            if end == start { continue }
            let first = text[start]
            if first == UInt8(ascii: " ") { return nil }
            if first == UInt8(ascii: "#") { continue }
            // The record's fields, split at every colon.
            var fields: [Range<Int>] = []
            var fieldStart = start
            for index in start...end where index == end || text[index] == UInt8(ascii: ":") {
                fields.append(fieldStart..<index)
                fieldStart = index + 1
            }
            guard text[fields[0]].elementsEqual(UnsafeRawBufferPointer(start: name, count: nameLength)) else { continue }
            guard found == nil, fields.count >= minimumFields else { return nil }
            var id: UInt32? = nil
            for field in numericFields {
                guard let value = number(text[fields[field]]) else { return nil }
                if id == nil { id = value }
            }
            found = id
        }
        return found
    }

    private static func number(_ digits: ArraySlice<UInt8>) -> UInt32? {
        guard !digits.isEmpty && digits.count <= 10 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        return value < 0xFFFF_FFFF ? UInt32(truncatingIfNeeded: value) : nil
    }

    private static func isPlainAccountName(_ name: UnsafePointer<CChar>) -> Bool {
        let first = UInt8(bitPattern: name[0])
        guard first != 0, first != UInt8(ascii: "+"), first != UInt8(ascii: "-"), first != UInt8(ascii: "#") else { return false }
        var index = 0
        while name[index] != 0 {
            let byte = UInt8(bitPattern: name[index])
            guard byte >= 0x21 && byte <= 0x7e && byte != UInt8(ascii: ":") else { return false }
            index += 1
        }
        return true
    }
}

/// What the C library's name service switch does with a lookup (only a dynamic full kc
/// asks it; the front holds both kinds to the same answer).
enum NameServiceSwitch {
    /// One line for `database` in /etc/nsswitch.conf (glibc takes a later line over an
    /// earlier one, and may match the name in either case: several lines are left to
    /// it), spelled so, whose first source is `files`, with no `[...]` action after it.
    static func asksFilesFirst(for database: StaticString) -> Bool {
        guard let text = FileBytes.read("/etc/nsswitch.conf", followingLinks: true, limit: 1 << 20) else { return false }
        let wanted = ascii(database)
        var lines = 0, filesFirst = false
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            defer { start = end + 1 }
            // A comment runs from `#` to the end of the line.
            var stop = start
            while stop < end && text[stop] != UInt8(ascii: "#") { stop += 1 }
            var index = start
            while index < stop && isSpace(text[index]) { index += 1 }
            let nameStart = index
            while index < stop && !isSpace(text[index]) && text[index] != UInt8(ascii: ":") { index += 1 }
            let name = text[nameStart..<index]
            guard name.elementsEqual(wanted, by: { $0 | 0x20 == $1 }) else { continue }
            lines += 1
            guard name.elementsEqual(wanted) else { return false }
            while index < stop && isSpace(text[index]) { index += 1 }
            guard index < stop && text[index] == UInt8(ascii: ":") else { continue }
            index += 1
            while index < stop && isSpace(text[index]) { index += 1 }
            let source = index
            while index < stop && !isSpace(text[index]) && text[index] != UInt8(ascii: "[") { index += 1 }
            while index < stop && isSpace(text[index]) { index += 1 }
            filesFirst = text[source..<min(source + 5, stop)].elementsEqual(ascii("files"))
                && (source + 5 == stop || isSpace(text[source + 5])) && (index == stop || text[index] != UInt8(ascii: "["))
        }
        return lines == 1 && filesFirst
    }

    /// Whether nscd may answer (it answers a dynamic program before any source):
    /// anything at its socket's path, or a path that cannot be looked at.
    static var hasCache: Bool {
        for path: StaticString in ["/var/run/nscd/socket", "/run/nscd/socket"] {
            let text = UnsafeRawPointer(path.utf8Start).assumingMemoryBound(to: CChar.self)
            var status = stat()
            if lstat(text, &status) == 0 || CFront_errno() != ENOENT { return true }
        }
        return false
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || (byte >= 0x09 && byte <= 0x0d)
    }
}

/// A small file read whole (`readProcBytes`: until end of file, retrying EINTR).
enum FileBytes {
    /// The file's bytes, or nil if it cannot be opened or read, or holds more than `limit`.
    static func read(_ path: StaticString, followingLinks: Bool, limit: Int) -> [UInt8]? {
        let descriptor = CFront_open_read(UnsafeRawPointer(path.utf8Start).assumingMemoryBound(to: CChar.self), followingLinks ? 1 : 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        // Read through a small buffer on the stack and copied: the files are small.
        return withUnsafeTemporaryAllocation(byteCount: 8192, alignment: 8) { chunk -> [UInt8]? in
            guard let base = chunk.baseAddress else { return nil }
            while true {
                let count = CFront.read(descriptor, base, chunk.count)
                if count < 0 {
                    if CFront_errno() == EINTR { continue }
                    return nil
                }
                if count == 0 { return bytes }
                bytes.append(contentsOf: UnsafeRawBufferPointer(start: base, count: count))
                guard bytes.count <= limit else { return nil }
            }
        }
    }
}

/// The keyrings of the one service another user shares with the group, found as the
/// full kc finds them (`SharedServices.visible(service:group:)`): the lines of
/// /proc/keys that name another uid's keyring whose description starts `kc:` or
/// `kc.local:`, each confirmed with `keyctl_describe` (a keyring, that uid's, this
/// service's, the group's, with view and read for the group).
struct SharedServiceRings {
    var owner: UInt64
    var rings: [key_serial_t]

    /// Nil unless exactly one owner shares the service with the group and every line and
    /// describe was read as the full kc reads it:
    /// - /proc/keys holds only printable ASCII and newlines (the full kc reads it as
    ///   Swift text, whose lines, fields and prefixes are the bytes' only then; a
    ///   carriage return would join two lines);
    /// - a line naming a kc keyring has the kernel's form (hex serial and mask, decimal
    ///   ids, an expiry), and no keyring is named twice (a description holding a newline
    ///   can forge a line);
    /// - each describe of a candidate succeeds and reads plainly (the full kc skips one
    ///   that fails; the front leaves that race to it).
    /// `gid`: only a keyring of that group's (`--group`); else any group the caller
    /// carries. `owner`: only that uid's lines (`--from`; others are not even described).
    static func find(_ service: UnsafePointer<CChar>, gid: UInt32?, owner: UInt64?) -> SharedServiceRings? {
        guard let text = FileBytes.read("/proc/keys", followingLinks: false, limit: 64 << 20) else { return nil }
        for byte in text where byte != UInt8(ascii: "\n") && (byte < 0x20 || byte > 0x7e) { return nil }
        let me = UInt64(geteuid())
        var found: SharedServiceRings? = nil
        var candidates: [key_serial_t] = []
        var start = 0
        while start < text.count {
            var end = start
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            defer { start = end + 1 }
            guard let line = ProcKeysLine(text, from: start, to: end) else { continue }
            guard let candidate = line.candidate else { return nil }
            guard candidate.uid != me, owner == nil || owner == candidate.uid else { continue }
            guard !candidates.contains(candidate.serial) else { return nil }
            candidates.append(candidate.serial)
            switch Self.confirm(candidate.serial, uid: candidate.uid, service: service, gid: gid) {
            case .uncertain: return nil
            case .other: continue
            case .shared:
                if var known = found {
                    guard known.owner == candidate.uid else { return nil }  // several owners: the full kc's error
                    known.rings.append(candidate.serial)
                    found = known
                } else {
                    found = SharedServiceRings(owner: candidate.uid, rings: [candidate.serial])
                }
            }
        }
        return found
    }

    private enum Confirmation { case shared, other, uncertain }

    /// The full kc's checks of one candidate, on its `keyctl_describe`.
    private static func confirm(_ ring: key_serial_t, uid: UInt64, service: UnsafePointer<CChar>, gid: UInt32?) -> Confirmation {
        KeyDescription.read(ring) { fields -> Confirmation in
            guard fields.skip(ifEqualTo: "keyring") else { return .other }
            guard let ownerUID = fields.number(radix: 10), let groupID = fields.number(radix: 10),
                  let permissions = fields.number(radix: 16) else { return .uncertain }
            guard ownerUID == uid else { return .other }
            var name = fields.position
            let portable: StaticString = "kc:", deviceOnly: StaticString = "kc.local:"
            if strncmp(name, UnsafeRawPointer(portable.utf8Start).assumingMemoryBound(to: CChar.self), 3) == 0 {
                name += 3
            } else if strncmp(name, UnsafeRawPointer(deviceOnly.utf8Start).assumingMemoryBound(to: CChar.self), 9) == 0 {
                name += 9
            } else {
                return .other
            }
            let groupRights = (permissions >> 8) & 0xff, viewAndRead: UInt64 = 0x01 | 0x02
            // (`gid == nil || gid == info.gid`, `callerGroups.contains(info.gid)`, `Sharing(info)`.)
            guard strcmp(name, service) == 0, gid.map({ UInt64($0) == groupID }) ?? true,
                  groupID <= 0xFFFF_FFFF && CallerGroups.include(UInt32(truncatingIfNeeded: groupID)),
                  groupRights & viewAndRead == viewAndRead else { return .other }
            return .shared
        } ?? .uncertain
    }

    /// The owner's `user` key named `item` in the first of the rings that holds one, as
    /// `SharedService.locate` finds it (members may not search: each keyring's links,
    /// then each key described; a key that cannot be described is passed over, as the
    /// full kc passes it). Nil for a miss or anything the full kc would report.
    func item(named item: UnsafePointer<CChar>) -> key_serial_t? {
        for ring in rings {
            guard let keys = ServiceKeyrings.linkedKeys(of: ring) else { return nil }
            for key in keys {
                let described: Bool?? = KeyDescription.read(key) { fields -> Bool? in
                    let isUser = fields.skip(ifEqualTo: "user")
                    guard isUser || fields.skip(), let uid = fields.number(radix: 10),
                          fields.number(radix: 10) != nil, fields.number(radix: 16) != nil else { return nil }
                    return isUser && uid == owner && strcmp(fields.position, item) == 0
                }
                guard let described else { continue }  // not described: passed over
                guard let matches = described else { return nil }
                if matches { return key }
            }
        }
        return nil
    }
}

/// One line of /proc/keys, `serial flags usage expiry perm uid gid type description: summary`,
/// split as `ProcKeysEntry(parsing:)` splits it (runs of spaces; the type column padded).
struct ProcKeysLine {
    /// A keyring of a kc service's name: its serial and uid; nil if the line has one of
    /// those names but not the kernel's form (the front then leaves it to the full kc).
    var candidate: (serial: key_serial_t, uid: UInt64)?

    /// Nil for a line that is not about a kc keyring at all (the full kc passes it over).
    init?(_ text: [UInt8], from start: Int, to end: Int) {
        var fields: [Range<Int>] = []
        var index = start
        while fields.count < 8 {
            while index < end && text[index] == UInt8(ascii: " ") { index += 1 }
            guard index < end else { return nil }
            let fieldStart = index
            while index < end && text[index] != UInt8(ascii: " ") { index += 1 }
            fields.append(fieldStart..<index)
        }
        while index < end && text[index] == UInt8(ascii: " ") { index += 1 }
        // The description up to the first ": " must start as a kc keyring's does.
        var prefixEnd = index
        while prefixEnd + 1 < end && !(text[prefixEnd] == UInt8(ascii: ":") && text[prefixEnd + 1] == UInt8(ascii: " ")) { prefixEnd += 1 }
        if prefixEnd + 1 >= end { prefixEnd = end }
        let description = text[index..<prefixEnd]
        guard text[fields[7]].elementsEqual(ascii("keyring")),
              description.starts(with: ascii("kc:")) || description.starts(with: ascii("kc.local:")) else { return nil }
        guard let serial = Self.hex(text[fields[0]]), serial > 0 && serial <= 0x7fff_ffff,
              Self.isExpiry(text[fields[3]]), Self.hex(text[fields[4]]) != nil,
              let uid = Self.id(text[fields[5]]), Self.id(text[fields[6]]) != nil
        else {
            candidate = nil
            return
        }
        candidate = (key_serial_t(truncatingIfNeeded: serial), uid)
    }

    /// 1-8 lowercase hex digits, as the kernel prints a serial or a mask.
    private static func hex(_ field: ArraySlice<UInt8>) -> UInt64? {
        guard !field.isEmpty && field.count <= 8 else { return nil }
        var value: UInt64 = 0
        for byte in field {
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): value = value << 4 | UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): value = value << 4 | UInt64(byte - UInt8(ascii: "a") + 10)
            default: return nil
            }
        }
        return value
    }

    /// A uid or gid as the kernel prints it (`%5d`): decimal digits, or a minus and digits
    /// for an id over 2^31 (read as the full kc reads it: its 32-bit pattern).
    private static func id(_ field: ArraySlice<UInt8>) -> UInt64? {
        let negative = field.first == UInt8(ascii: "-")
        let digits = negative ? field.dropFirst() : field
        guard !digits.isEmpty && digits.count <= 10 else { return nil }
        var value: UInt64 = 0
        for byte in digits {
            guard byte >= UInt8(ascii: "0") && byte <= UInt8(ascii: "9") else { return nil }
            value = value * 10 + UInt64(byte - UInt8(ascii: "0"))
        }
        if negative {
            guard value >= 1 && value <= 0x8000_0000 else { return nil }
            return (0x1_0000_0000 - value) & 0xFFFF_FFFF
        }
        return value <= 0xFFFF_FFFF ? value : nil
    }

    /// `perm`, `expd`, or a count and a unit (s, m, h, d, w).
    private static func isExpiry(_ field: ArraySlice<UInt8>) -> Bool {
        if field.elementsEqual(ascii("perm")) || field.elementsEqual(ascii("expd")) { return true }
        guard let unit = field.last, field.count >= 2, field.count <= 8, ascii("smhdw").contains(unit) else { return false }
        return field.dropLast().allSatisfy { $0 >= UInt8(ascii: "0") && $0 <= UInt8(ascii: "9") }
    }
}

/// The bytes of an ASCII literal, without making a String.
private func ascii(_ text: StaticString) -> UnsafeBufferPointer<UInt8> {
    UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
}
