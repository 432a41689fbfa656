import CKeyutils

/// The local account files, /etc/passwd and /etc/group, read as both programs read them:
/// the static full kc looks names and ids up in them itself (it must not load NSS
/// modules), and the front reads them to know a name the full kc would resolve.
public enum AccountFiles {
    /// Calls `body` with the fields of each record of `text`, split at every colon, until
    /// it returns false. Read as glibc's files source reads them (checked with `getent` over
    /// a bind-mounted /etc/group): blanks at the start of a line are passed over, then
    /// empty lines and comments (`#`) skipped; NIS compat entries (`+`, `-`) are skipped too.
    public static func forEachRecord(in text: UnsafeRawBufferPointer, _ body: (_ fields: [Range<Int>]) -> Bool) {
        var lineStart = 0
        while lineStart < text.count {
            var start = lineStart, end = lineStart
            while end < text.count && text[end] != UInt8(ascii: "\n") { end += 1 }
            defer { lineStart = end + 1 }
            while start < end && (text[start] == UInt8(ascii: " ") || (text[start] >= 0x09 && text[start] <= 0x0d)) { start += 1 }
            guard end > start else { continue }
            switch text[start] {
            case UInt8(ascii: "#"), UInt8(ascii: "+"), UInt8(ascii: "-"): continue
            default: break
            }
            var fields: [Range<Int>] = []
            var fieldStart = start
            for index in start...end where index == end || text[index] == UInt8(ascii: ":") {
                fields.append(fieldStart..<index)
                fieldStart = index + 1
            }
            if !body(fields) { return }
        }
    }

    /// A uid or gid field: 1–10 decimal digits, below 2^32 - 1 (which means "no id").
    public static func id(_ digits: Slice<UnsafeRawBufferPointer>) -> UInt32? {
        guard let value = decimal(digits), value < 0xFFFF_FFFF else { return nil }
        return UInt32(truncatingIfNeeded: value)
    }

    /// The group a name means to the full kc (`Accounts.gid(ofGroup:)`), where that is
    /// certain whichever full kc runs (``certainID(named:database:path:minimumFields:numericFields:)``).
    /// `NAME:PASSWORD:GID[:MEMBERS]`.
    public static func certainGID(named name: UnsafePointer<CChar>) -> UInt32? {
        certainID(named: name, database: "group", path: "/etc/group", minimumFields: 3, numericFields: 2...2)
    }

    /// The user a name means to the full kc (`Accounts.uid(ofUser:)`):
    /// `NAME:PASSWORD:UID:GID:GECOS:HOME[:SHELL]` (the static kc needs six fields and a
    /// numeric gid as well).
    public static func certainUID(named name: UnsafePointer<CChar>) -> UInt32? {
        certainID(named: name, database: "passwd", path: "/etc/passwd", minimumFields: 6, numericFields: 2...3)
    }

    /// Field 2 of the one record named `name`, where the id is certain whichever full kc
    /// is beside the front: the static one reads the file with ``forEachRecord(in:_:)`` and
    /// takes the first record of that name; a dynamic one asks the C library, whose NSS
    /// asks the sources nsswitch.conf lists. Both give the same id when the file answers
    /// unambiguously and is asked first:
    /// - the name is plain ASCII (`!`..`~`, no `:`, not starting with `+`, `-` or `#`), so
    ///   Swift's string equality is byte equality;
    /// - nsswitch.conf has one line for the database and it begins with `files` with no
    ///   action after it (files answers first, and a name it finds is final), and no nscd
    ///   socket exists (nscd answers before files, from its cache);
    /// - the file (not a link: the static kc does not follow one) holds only printable
    ///   ASCII and newlines, and exactly one record has that name, with enough fields for
    ///   both readers and its numeric fields plain digits below 2^32 - 1.
    /// Otherwise nil: a name the file lacks (the full kc then takes a number as an id, or
    /// asks NSS's next source, or says it is unknown), or any doubt, is the full kc's.
    private static func certainID(named name: UnsafePointer<CChar>, database: StaticString, path: StaticString,
                                  minimumFields: Int, numericFields: ClosedRange<Int>) -> UInt32? {
        guard isPlainAccountName(name), NameServiceSwitch.asksFilesFirst(for: database), !NameServiceSwitch.hasCache,
              let text = FileBytes.read(cString(path), followingLinks: false, limit: 1 << 22) else { return nil }
        for byte in text where byte != UInt8(ascii: "\n") && (byte < 0x20 || byte > 0x7e) { return nil }
        let wanted = UnsafeRawBufferPointer(start: name, count: strlen(name))
        var found: UInt32? = nil, doubt = false
        text.withUnsafeBytes { text in
            forEachRecord(in: text) { fields in
                guard text[fields[0]].elementsEqual(wanted) else { return true }
                guard found == nil, fields.count >= minimumFields else {
                    doubt = true
                    return false
                }
                var id: UInt32? = nil
                for field in numericFields {
                    guard let value = Self.id(text[fields[field]]) else {
                        doubt = true
                        return false
                    }
                    if id == nil { id = value }
                }
                found = id
                return true
            }
        }
        return doubt ? nil : found
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

/// The caller's groups as the kernel checks them: the effective gid and the supplementary ones.
public enum CallerGroups {
    /// The supplementary groups.
    public static func supplementary() -> [UInt32] {
        let count = getgroups(0, nil)
        guard count > 0 else { return [] }
        var groups = [gid_t](repeating: 0, count: Int(count))
        let filled = groups.withUnsafeMutableBufferPointer { getgroups(count, $0.baseAddress) }
        return filled > 0 ? Array(groups[0..<Int(filled)]) : []
    }

    /// Whether the caller carries `gid`.
    public static func include(_ gid: UInt32) -> Bool {
        getegid() == gid || supplementary().contains(gid)
    }
}

/// What the C library's name service switch does with a lookup (only a dynamic full kc
/// asks it; the front holds both kinds to the same answer).
public enum NameServiceSwitch {
    /// One line for `database` in /etc/nsswitch.conf (glibc takes a later line over an
    /// earlier one, and may match the name in either case: several lines are left to
    /// it), spelled so, whose first source is `files`, with no `[...]` action after it.
    public static func asksFilesFirst(for database: StaticString) -> Bool {
        guard let text = FileBytes.read(cString("/etc/nsswitch.conf"), followingLinks: true, limit: 1 << 20) else { return false }
        let wanted = staticBytes(database)
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
            filesFirst = text[source..<min(source + 5, stop)].elementsEqual(staticBytes("files"))
                && (source + 5 == stop || isSpace(text[source + 5])) && (index == stop || text[index] != UInt8(ascii: "["))
        }
        return lines == 1 && filesFirst
    }

    /// Whether nscd may answer (it answers a dynamic program before any source):
    /// anything at its socket's path, or a path that cannot be looked at.
    public static var hasCache: Bool {
        for path: StaticString in ["/var/run/nscd/socket", "/run/nscd/socket"] {
            let text = UnsafeRawPointer(path.utf8Start).assumingMemoryBound(to: CChar.self)
            var status = stat()
            if lstat(text, &status) == 0 || CKeyutils_errno() != ENOENT { return true }
        }
        return false
    }

    private static func isSpace(_ byte: UInt8) -> Bool {
        byte == UInt8(ascii: " ") || (byte >= 0x09 && byte <= 0x0d)
    }
}

/// A small file read whole, until end of file (files under /proc report a size of 0),
/// retrying EINTR.
public enum FileBytes {
    /// The file's bytes, or nil if it cannot be opened or read, or holds more than `limit`.
    public static func read(_ path: UnsafePointer<CChar>, followingLinks: Bool, limit: Int) -> [UInt8]? {
        let descriptor = CKeyutils_open_read(path, followingLinks ? 1 : 0)
        guard descriptor >= 0 else { return nil }
        defer { close(descriptor) }
        var bytes: [UInt8] = []
        // Read through a small buffer on the stack and copied: the files are small.
        return withUnsafeTemporaryAllocation(byteCount: 8192, alignment: 8) { chunk -> [UInt8]? in
            guard let base = chunk.baseAddress else { return nil }
            while true {
                let count = CKeyutils.read(descriptor, base, chunk.count)
                if count < 0 {
                    if CKeyutils_errno() == EINTR { continue }
                    return nil
                }
                if count == 0 { return bytes }
                bytes.append(contentsOf: UnsafeRawBufferPointer(start: base, count: count))
                guard bytes.count <= limit else { return nil }
            }
        }
    }
}

