import CKeyutils

// kc's front (docs/FRONT.md): a small program, installed as `kc` with the full kc beside
// it as `kc-full`, that serves a few certain cases itself: `kc get [-q] SERVICE ITEM`
// when the item is in the service's keyring at its home level, or when it is certainly
// nowhere and there is no vault; and `kc ls SERVICE` when there is no vault. It finds
// them by the kernel calls the full kc makes. For everything else (another command or
// spelling, a name the full kc would refuse, a vault, anything the full kc would repair
// or report, KC_AUDIT set for a get) it executes the full kc with argv, the environment
// and the descriptors as they came, having changed nothing the full kc could see, so
// the full kc says and does what it always did.
//
// Embedded Swift (Tools/build-front.sh): no runtime to set up before `main`, so a
// command served here costs what a static C program costs (docs/BENCHMARKS.md).

@_cdecl("main")
func main(_ argc: Int32, _ argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
          _ environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Int32 {
    if let program = argv[0], let helper = CredentialHelper(program: program) {
        helper.serveGet(argc: argc, argv: argv, environment: environment)  // Front/CredentialHelpers.swift
    } else if let program = argv[0], !isHelperName(program) {
        // The read audit logs each value written; that is the full kc's to do.
        if let request = PlainGet(argc: argc, argv: argv), getenv("KC_AUDIT") == nil {
            request.serveIfAtHome()
            request.reportIfMissingEverywhere()
        } else if let request = SharedGet(argc: argc, argv: argv), getenv("KC_AUDIT") == nil {
            request.serveIfCertain()  // --group or --from (Front/Shared.swift)
        } else if let request = PlainList(argc: argc, argv: argv) {
            request.serveIfNoVault()
        } else if let request = PlainSet(argc: argc, argv: argv) {
            request.serveIfUpdatingInPlace()
        } else if let request = PlainRemove(argc: argc, argv: argv) {
            request.serveIfOneCopy()
        } else if let request = PlainExec(argc: argc, argv: argv) {
            request.serveIfOwnAndPlain(environment: environment)  // Front/Exec.swift
        }
    }
    FullKC.run(argv: argv, environment: environment)
}

/// Installed as git-credential-kc or docker-credential-kc (links to kc), the full kc
/// is that helper, whatever the arguments.
private func isHelperName(_ program: UnsafePointer<CChar>) -> Bool {
    let name = strrchr(program, Int32(UInt8(ascii: "/"))).map { UnsafePointer($0 + 1) } ?? program
    return strcmp(name, "git-credential-kc") == 0 || strcmp(name, "docker-credential-kc") == 0
}

/// The names of `kc COMMAND` in its plain spelling (the core's ``PlainCommandLine``, the
/// reader the full kc's fast path uses): `-q`/`--quiet` if `takesQuiet`, then `count`
/// names kc takes as they are. Nil for anything else (the full kc's to read).
func plainNames(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, command: StaticString,
                count: Int, takesQuiet: Bool) -> (names: [UnsafePointer<CChar>], quiet: Bool)? {
    let quiet: [StaticString] = ["-q", "--quiet"]
    guard PlainCommandLine.argument(argc: argc, argv: argv, 1, is: command),
          let line = PlainCommandLine(argc: argc, argv: argv, from: 2,
                                      .init(flags: takesQuiet ? [quiet] : [], names: count...count)),
          line.namesAreValid else { return nil }
    return (line.names, line.has(quiet))
}

/// The full kc finds a service's items only where this holds; elsewhere it anchors
/// differently (a user namespace) or may load from the vault (one exists, or its place
/// cannot be told without the password database).
func hasNoVaultOutsideNamespaces(checkingStash: Bool) -> Bool {
    guard InitialUserNamespace.contains == true, let root = Vault.defaultRoot, Vault.isAbsent(at: root) else { return false }
    return !checkingStash || Vault.stashSearchIsPlain(at: root)
}

/// `kc get [-q|--quiet] [--] SERVICE ITEM` with names the full kc takes as they are.
struct PlainGet {
    let service: UnsafePointer<CChar>
    let item: UnsafePointer<CChar>
    /// `-q`: a miss prints nothing.
    let quiet: Bool

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard let line = plainNames(argc: argc, argv: argv, command: "get", count: 2, takesQuiet: true) else { return nil }
        service = line.names[0]
        item = line.names[1]
        quiet = line.quiet
    }

    /// Writes the item's value and exits, as the full kc's `kc get` does on a hit
    /// (Sources/kc/Get.swift), if the item is in the service's keyring at its home level.
    /// Otherwise returns, having changed nothing the full kc could see.
    func serveIfAtHome() {
        // Inside a user namespace the owner check can mean less (an unmapped uid shows
        // every owner as the same overflow uid): the full kc's to judge.
        guard InitialUserNamespace.contains == true,
              case .found(let ring) = ServiceKeyringProbe.find(service, prefix: "kc:", under: KEY_SPEC_SESSION_KEYRING),
              case .found(let key) = KernelSearch(in: ring, type: "user", description: item) else { return }
        ValueOutput.writeAndExit(key)
    }

    /// Says so and exits 1, as the full kc's `kc get` does on a miss, if the item is
    /// certainly nowhere: there is no vault to load it from (the full kc's
    /// `Vault.reloadIfKept`), and the full kc's probe of every level
    /// (`OwnService.locate`: the home keyring, then each anchor's service keyrings)
    /// finds no keyring it would repair or could not read and no such item in any.
    /// Otherwise returns.
    func reportIfMissingEverywhere() {
        guard hasNoVaultOutsideNamespaces(checkingStash: false) else { return }
        let missing = ServiceKeyringProbe.probe(service) { ring, _ in
            // Every keyring found is searched, linked directly or not (the full kc
            // searches those and the home one): a hit anywhere is the full kc's.
            if case .absent = KernelSearch(in: ring, type: "user", description: item) { return true }
            return false
        }
        guard missing else { return }
        if !quiet {
            var line = ByteText()
            line.append("kc: no item '")
            line.appendShown(item)
            line.append("' in service '")
            line.appendShown(service)
            line.append("'; list the items with 'kc ls ")
            line.appendShown(service)
            line.append("'\n")
            line.bytes.withUnsafeBytes { _ = StandardStream.write($0, to: 2) }
        }
        exit(1)
    }
}

/// `kc ls [--] SERVICE` with a name the full kc takes as it is.
struct PlainList {
    let service: UnsafePointer<CChar>

    init?(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard let line = plainNames(argc: argc, argv: argv, command: "ls", count: 1, takesQuiet: false) else { return nil }
        service = line.names[0]
    }

    /// Lists the service's item names and exits, as the full kc's plain `kc ls SERVICE`
    /// does (Sources/kc/List.swift, `listItemNames`), when there is no vault (which would
    /// load missing items first) and every call is answered as the full kc takes it
    /// without a change: the probe of every level's service keyrings, and in each one
    /// linked directly in its anchor, each key described (the caller's own; other
    /// uids' and expired ones the full kc unlinks) and each `user` key's size read.
    /// The names are sorted by their bytes, one per line, exact; at a terminal the full
    /// kc escapes names with bytes it would change, so those are its own to show.
    /// Otherwise returns, having changed nothing the full kc could see.
    func serveIfNoVault() {
        guard hasNoVaultOutsideNamespaces(checkingStash: true) else { return }
        var names: [[UInt8]] = []
        var serviceExists = false
        let certain = ServiceKeyringProbe.probe(service) { ring, linkedDirectly in
            serviceExists = true
            return !linkedDirectly || ServiceKeyringProbe.appendUserKeyNames(of: ring, to: &names, checkingSize: true)
        }
        guard certain else { return }
        if names.isEmpty && !serviceExists {
            var line = ByteText()
            line.append("kc: no service '")
            line.appendShown(service)
            line.append("'; list the services with 'kc ls'\n")
            line.bytes.withUnsafeBytes { _ = StandardStream.write($0, to: 2) }
            exit(1)
        }
        names.sort { $0.lexicographicallyPrecedes($1) }
        var output = ByteText()
        for name in names {
            output.append(name)
            output.append("\n")
        }
        // `ReadAudit.mayEscape`, name by name (a name may hold a newline).
        let mayEscape = names.contains { name in
            name.contains { $0 < 0x20 || $0 == 0x7f || $0 == UInt8(ascii: "\\") || $0 >= 0x80 }
        }
        if mayEscape && isatty(1) == 1 { return }
        guard output.bytes.withUnsafeBytes({ StandardStream.write($0, to: 1) }) else {
            let error = CKeyutils_errno()
            StandardStream.report("kc: cannot write to standard output: ", strerror(error), "\n")
            exit(2)
        }
        exit(0)
    }
}

/// One read of an item found (at home, or in a service shared with the caller), written
/// out as `printValue` writes a hit (Sources/kc/Get.swift), with core dumps off first as
/// the full kc has them (Sources/kc/CoreDumps.swift): one `keyctl_read` into a 32 KiB
/// buffer (a `user` key holds at most 32767 bytes), the exact bytes, a newline only if
/// standard output is a terminal and the value does not end in one, the buffer zeroed.
enum ValueOutput {
    /// Exits 0 (or 2 if standard output cannot be written); returns if the read fails,
    /// with the caller's core-file limit given back (the full kc decides).
    static func writeAndExit(_ key: Int32) {
        let callersLimit = CoreDumps.disable()
        withUnsafeTemporaryAllocation(byteCount: 32768, alignment: 8) { buffer in
            guard let base = buffer.baseAddress else { return }
            let length = keyctl_read(key, base.assumingMemoryBound(to: CChar.self), buffer.count)
            // One NUL byte may be a key marked empty (Sources/Keyrings/ItemValue.swift): the full kc decides.
            guard length >= 0 && length <= buffer.count && !(length == 1 && base.load(as: UInt8.self) == 0) else {
                if length > 0 { explicit_bzero(base, buffer.count) }
                CoreDumps.restore(callersLimit)
                return  // removed, expired or unshared since it was found, or refused: the full kc decides
            }
            let value = UnsafeRawBufferPointer(start: base, count: length)
            let newline: StaticString = "\n"
            let written = StandardStream.write(value, to: 1)
                && (value.last == UInt8(ascii: "\n") || isatty(1) != 1
                    || StandardStream.write(UnsafeRawBufferPointer(start: newline.utf8Start, count: 1), to: 1))
            explicit_bzero(base, length)
            guard written else {
                StandardStream.report("kc: cannot write to standard output\n")
                exit(2)
            }
            exit(0)
        }
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
        _ = CKeyutils_disable_dumping()
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
    /// Executes `kc-full` beside this file. If it cannot, says so (unless told not to)
    /// and exits as a shell does for a command it cannot run: 127 where there is no
    /// such file, 126 for any other failure (pam_kc logs both); or exits 0 without a word.
    static func run(argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                    environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>, reportingFailure: Bool = true) -> Never {
        let name: StaticString = "kc-full"
        let capacity = Int(PATH_MAX) + 1
        withUnsafeTemporaryAllocation(of: CChar.self, capacity: capacity) { path -> Never in
            guard let base = path.baseAddress else { exit(reportingFailure ? 126 : 0) }
            let length = readlink("/proc/self/exe", base, capacity - 1)
            guard length > 0 else {
                let error = CKeyutils_errno()
                if !reportingFailure { exit(0) }
                StandardStream.report("kc: cannot find the full kc: /proc/self/exe: ", strerror(error), "; check that /proc is mounted\n")
                exit(127)
            }
            base[length] = 0
            guard let slash = strrchr(base, Int32(UInt8(ascii: "/"))),
                  slash + 1 - base + name.utf8CodeUnitCount < capacity else {
                if !reportingFailure { exit(0) }
                StandardStream.report("kc: cannot find the full kc beside ", base, "\n")
                exit(127)
            }
            strcpy(slash + 1, UnsafeRawPointer(name.utf8Start).assumingMemoryBound(to: CChar.self))
            if reportingFailure { refuseIfAddressSpaceTooSmall(base) }
            execve(base, argv, environment)
            let error = CKeyutils_errno()
            if !reportingFailure { exit(0) }
            StandardStream.report("kc: cannot run the full kc, ", base, ": ", strerror(error), "; check that kc is installed whole\n")
            exit(error == ENOENT || error == ENOTDIR ? 127 : 126)
        }
    }
}

extension FullKC {
    /// Under `ulimit -v` too small for the full kc, execve fails after the point of no
    /// return and the kernel kills the process with SIGSEGV, before a word can be said.
    /// So the front says it first: the full kc needs its file's size and about 8 MiB
    /// more (its runtime's heap and the stack) of address space.
    static func refuseIfAddressSpaceTooSmall(_ path: UnsafePointer<CChar>) {
        var limit = rlimit()
        guard getrlimit(__rlimit_resource_t(RLIMIT_AS.rawValue), &limit) == 0, limit.rlim_cur != ~0 else { return }  // ~0: RLIM_INFINITY
        var info = stat()
        guard stat(path, &info) == 0 else { return }
        let needed = UInt64(info.st_size) + 8 << 20
        guard UInt64(limit.rlim_cur) < needed else { return }
        var line = ByteText()
        line.append("kc: the address-space limit (ulimit -v ")
        line.append(decimal: UInt64(limit.rlim_cur) >> 10)
        line.append(" KiB) is too small for the full kc, ")
        line.append(path)
        line.append(", which needs about ")
        line.append(decimal: (needed >> 10) + 1)
        line.append(" KiB; raise it (ulimit -v unlimited) and run kc again\n")
        line.withCString { StandardStream.report($0) }
        exit(126)
    }
}

/// Writes to the standard streams with write(2), never through stdio.
enum StandardStream {
    /// Writes every byte, retrying short writes and EINTR; false on any other error.
    static func write(_ bytes: UnsafeRawBufferPointer, to descriptor: Int32) -> Bool {
        guard let base = bytes.baseAddress else { return true }
        var offset = 0
        while offset < bytes.count {
            let written = CKeyutils.write(descriptor, base + offset, bytes.count - offset)
            if written < 0 {
                if CKeyutils_errno() == EINTR { continue }
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
