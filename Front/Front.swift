import CFront

// kc's front (docs/FRONT.md): a small program, installed as `kc` with the full kc beside
// it as `kc-full`, that serves one thing itself: `kc get [-q|--quiet] [--] SERVICE ITEM`
// when the item is in the service's keyring at its home level, found by the kernel calls
// the full kc makes. For everything else (another command or spelling, a miss, a name the
// full kc would refuse, any failure, KC_AUDIT set) it executes the full kc with argv, the
// environment and the descriptors as they came, having changed nothing, so the full kc
// says and does what it always did.
//
// Embedded Swift (Tools/build-front.sh): no runtime to set up before `main`, so a
// `kc get` served here costs what a static C program costs (docs/BENCHMARKS.md).

@_cdecl("main")
func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
          _ environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    // The read audit logs each value written; that is the full kc's to do.
    if let request = PlainGet(argc: argc, argv: argv), getenv("KC_AUDIT") == nil {
        request.serveIfAtHome()
    }
    FullKC.run(argv: argv, environment: environment)
}

/// `kc get [-q|--quiet] [--] SERVICE ITEM` with names the full kc takes as they are:
/// the one command line the front may serve. The words are read as the full kc's
/// plain spelling reads them (Sources/kc/PlainCommandLine.swift): the flag at most once,
/// anywhere before `--`; after `--` every word is a name. `-q` changes only what a miss
/// prints, and a miss is the full kc's, so it is accepted and not kept.
struct PlainGet {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard argc >= 4, let program = argv[0], !Self.isHelperName(program),
              let command = argv[1], strcmp(command, "get") == 0 else { return nil }
        var service: UnsafePointer<CChar>? = nil, item: UnsafePointer<CChar>? = nil
        var quiet = false, optionsEnded = false
        for index in 2..<Int(argc) {
            guard let word = argv[index].map({ UnsafePointer($0) }) else { return nil }
            if !optionsEnded && word[0] == CChar(UInt8(ascii: "-")) {
                if strcmp(word, "--") == 0 {
                    optionsEnded = true
                } else if !quiet && (strcmp(word, "-q") == 0 || strcmp(word, "--quiet") == 0) {
                    quiet = true
                } else {
                    return nil  // --group, --from, --help, a repeated -q, --quiet=...
                }
            } else if service == nil {
                service = word
            } else if item == nil {
                item = word
            } else {
                return nil
            }
        }
        guard let service, let item, Self.isPlainName(service), Self.isPlainName(item) else { return nil }
        self.service = service
        self.item = item
    }

    /// Installed as git-credential-kc or docker-credential-kc (links to kc), the full kc
    /// is that helper, whatever the arguments.
    private static func isHelperName(_ program: UnsafePointer<CChar>) -> Bool {
        let name = strrchr(program, Int32(UInt8(ascii: "/"))).map { UnsafePointer($0 + 1) } ?? program
        return strcmp(name, "git-credential-kc") == 0 || strcmp(name, "docker-credential-kc") == 0
    }

    /// A name the full kc accepts without a word (DESIGN §3): 1–255 bytes, no `/`, not
    /// `.` or `..` (a word of argv cannot hold a NUL). Any other is the full kc's to refuse.
    private static func isPlainName(_ name: UnsafePointer<CChar>) -> Bool {
        let length = strnlen(name, 256)
        return length >= 1 && length <= 255 && strchr(name, Int32(UInt8(ascii: "/"))) == nil
            && strcmp(name, ".") != 0 && strcmp(name, "..") != 0
    }

    /// Writes the item's value and exits, as the full kc's `kc get` does on a hit
    /// (Sources/kc/Get.swift), if the item is in the service's keyring at its home level.
    /// Otherwise returns, having changed nothing the full kc could see.
    func serveIfAtHome() {
        guard let ring = HomeKeyring.find(service: service) else { return }
        let key = keyctl_search(ring, "user", item, 0)
        guard key > 0 else { return }
        let callersLimit = CoreDumps.disable()
        // A `user` key holds at most 32767 bytes: one read takes any value whole.
        withUnsafeTemporaryAllocation(byteCount: 32768, alignment: 8) { buffer in
            guard let base = buffer.baseAddress else { return }
            let length = keyctl_read(key_serial_t(truncatingIfNeeded: key), base.assumingMemoryBound(to: CChar.self), buffer.count)
            guard length >= 0 && length <= buffer.count else {
                if length > 0 { explicit_bzero(base, buffer.count) }
                CoreDumps.restore(callersLimit)
                return  // removed or expired since the search, or refused: the full kc decides
            }
            let value = UnsafeRawBufferPointer(start: base, count: length)
            // On a terminal, a value that does not end in a newline gets one.
            let written = StandardStream.write(value, to: 1)
                && (value.last == UInt8(ascii: "\n") || isatty(1) != 1 || StandardStream.write(newline, to: 1))
            explicit_bzero(base, length)
            guard written else {
                StandardStream.report("kc: cannot write to standard output\n")
                exit(2)
            }
            exit(0)
        }
    }

    private var newline: UnsafeRawBufferPointer {
        let text: StaticString = "\n"
        return UnsafeRawBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount)
    }
}

/// The service's keyring at its home level, as the full kc finds it for a read
/// (Sources/KernelKeychain/Placement/ServiceKeyring.swift, `findDescribed`): a search of
/// the session keyring for `kc:SERVICE`, then the owner check.
enum HomeKeyring {
    /// The keyring, if it is the caller's own (its uid is this process's effective uid)
    /// and has the masks kc gives its keyrings. Nil where the full kc would do anything
    /// else: no such keyring, another uid's, one whose masks it would repair, an error.
    static func find(service: UnsafePointer<CChar>) -> key_serial_t? {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 3 + 255 + 1) { description -> key_serial_t? in
            guard let base = description.baseAddress else { return nil }
            strcpy(base, "kc:")
            strcat(base, service)  // at most 255 bytes (PlainGet)
            let ring = keyctl_search(KEY_SPEC_SESSION_KEYRING, "keyring", base, 0)
            guard ring > 0 else { return nil }
            let serial = key_serial_t(truncatingIfNeeded: ring)
            return isOwnAsKcMakesIt(serial) ? serial : nil
        }
    }

    /// `keyctl_describe` gives `type;uid;gid;perm;description`. The keyring is used only
    /// if its uid is the caller's and its mask grants possessors nothing and the group
    /// neither write nor search (the full kc repairs any other mask before it reads).
    private static func isOwnAsKcMakesIt(_ ring: key_serial_t) -> Bool {
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: 512) { text -> Bool in
            guard let base = text.baseAddress else { return false }
            let length = keyctl_describe(ring, base, text.count)
            guard length > 0 && length <= text.count else { return false }
            var fields = DescribeFields(base)
            guard fields.skip(),  // type
                  let uid = fields.number(radix: 10), uid == UInt64(geteuid()),
                  fields.skip(),  // gid
                  let permissions = fields.number(radix: 16)
            else { return false }
            let possessor = (permissions >> 24) & 0x3f, group = (permissions >> 8) & 0x3f
            let groupWriteOrSearch: UInt64 = 0x04 | 0x08
            return possessor == 0 && group & groupWriteOrSearch == 0
        }
    }
}

/// The `;`-separated fields at the head of a describe string, read one by one.
struct DescribeFields {
    private var position: UnsafePointer<CChar>

    init(_ text: UnsafePointer<CChar>) { position = text }

    /// Passes over the next field; false if there is no `;` after it.
    mutating func skip() -> Bool {
        guard let end = strchr(position, Int32(UInt8(ascii: ";"))) else { return false }
        position = UnsafePointer(end + 1)
        return true
    }

    /// The next field as an unsigned number of at most 8 digits (a uid, a mask), or nil
    /// for anything else (an empty field, `-1`, a field not ended by `;`).
    mutating func number(radix: UInt64) -> UInt64? {
        var value: UInt64 = 0, digits = 0
        while position[0] != CChar(UInt8(ascii: ";")) {
            let byte = UInt8(bitPattern: position[0])
            let digit: UInt64
            switch byte {
            case UInt8(ascii: "0")...UInt8(ascii: "9"): digit = UInt64(byte - UInt8(ascii: "0"))
            case UInt8(ascii: "a")...UInt8(ascii: "f"): digit = UInt64(byte - UInt8(ascii: "a")) + 10
            default: return nil  // also the NUL at the end
            }
            guard digit < radix, digits < 10 else { return nil }
            value = value * radix + digit
            digits += 1
            position += 1
        }
        guard digits > 0 else { return nil }
        position += 1
        return value
    }
}

/// Core dumps off before a value is read, as the full kc turns them off at its start
/// (Sources/kc/CoreDumps.swift): the soft core-file limit to 0 where it was not 0, and
/// the process undumpable.
enum CoreDumps {
    /// Turns them off; returns the limit the caller gave, for ``restore(_:)``.
    static func disable() -> rlimit {
        let core = __rlimit_resource_t(RLIMIT_CORE.rawValue)
        var limit = rlimit()
        if getrlimit(core, &limit) == 0 && limit.rlim_cur != 0 {
            var off = limit
            off.rlim_cur = 0
            _ = setrlimit(core, &off)
        }
        _ = CFront_disable_dumping()
        return limit
    }

    /// Gives the caller's limit back before the full kc runs: it reads the limit it
    /// starts with as the caller's, and `kc exec` hands that on. (The undumpable flag
    /// ends at execve.)
    static func restore(_ limit: rlimit) {
        var limit = limit
        if limit.rlim_cur != 0 { _ = setrlimit(__rlimit_resource_t(RLIMIT_CORE.rawValue), &limit) }
    }
}

/// The full kc: `kc-full` in the folder this executable is in. /proc/self/exe names
/// this file itself, whatever name or link (git-credential-kc, a PATH entry, a relative
/// path) started it, so the two that were installed together run together.
enum FullKC {
    static func run(argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                    environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Never {
        let name: StaticString = "kc-full"
        let capacity = Int(PATH_MAX) + 1
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { path -> Never in
            guard let base = path.baseAddress else { exit(2) }
            let length = readlink("/proc/self/exe", base, capacity - 1)
            guard length > 0 else {
                let error = CFront_errno()
                StandardStream.report("kc: cannot find the full kc: /proc/self/exe: ", strerror(error), "; check that /proc is mounted\n")
                exit(2)
            }
            base[length] = 0
            guard let slash = strrchr(base, Int32(UInt8(ascii: "/"))),
                  slash + 1 - base + name.utf8CodeUnitCount < capacity else {
                StandardStream.report("kc: cannot find the full kc beside ", base, "\n")
                exit(2)
            }
            strcpy(slash + 1, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self))
            execve(base, argv, environment)
            let error = CFront_errno()
            StandardStream.report("kc: cannot run the full kc, ", base, ": ", strerror(error), "; check that kc is installed whole\n")
            exit(2)
        }
    }
}

/// Writes to the standard streams with write(2), never through stdio.
enum StandardStream {
    /// Writes every byte, retrying short writes and EINTR; false on any other error.
    static func write(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset < bytes.count {
            let written = CFront.write(descriptor, base + offset, bytes.count - offset)
            if written < 0 {
                if CFront_errno() == EINTR { continue }
                return false
            }
            offset += written
        }
        return true
    }

    /// Writes one line of parts to standard error, in one write.
    static func report(_ parts: UnsafePointer<CChar>?...) {
        var line = [UInt8]()
        for part in parts {
            guard let part else { continue }
            line.append(contentsOf: UnsafeRawBufferPointer(start: part, count: strlen(part)))
        }
        line.withUnsafeBytes { _ = write($0, to: 2) }
    }
}
