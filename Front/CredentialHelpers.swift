import CKeyutils

// The credential helpers' `get` in the front (docs/FRONT.md, "The credential helpers"):
// run as git-credential-kc or docker-credential-kc (links to kc), the front answers the
// certain common cases of `get` itself, with the full kc's kernel calls and its exact
// bytes, and hands everything else to the full kc.
//
// A helper's answer depends on its standard input, so the front reads it first, as the
// full kc reads it (Sources/kc/HelperInput.swift: the same reads, stopping where the full
// kc stops). If it then hands over, the full kc gets those bytes as its standard input in
// an anonymous file in memory (memfd), from the start: it reads them exactly as it would
// have read them from the caller, and what the caller sent after that point is left
// unread by both. Before reading, nothing has been touched, and the front hands over as
// for any other command.

/// The credential helper argv[0] names (its base name), if any.
enum CredentialHelper {
    case git, docker

    init?(program: UnsafePointer<CChar>) {
        let name = strrchr(program, Int32(UInt8(ascii: "/"))).map { UnsafePointer($0 + 1) } ?? program
        if strcmp(name, "git-credential-kc") == 0 {
            self = .git
        } else if strcmp(name, "docker-credential-kc") == 0 {
            self = .docker
        } else {
            return nil
        }
    }

    /// The most input the full kc reads (`GitCredentialHelper.inputLimit`,
    /// `DockerCredentialHelper.inputLimit`).
    private var inputLimit: Int { self == .git ? 65536 : 262_144 }

    /// Answers `get` and exits, if the command line is the full kc's plain `get` and the
    /// answer is certain: there is no vault (which a miss or a listing would consult),
    /// the input is what the front reads without doubt, and every keyring call is
    /// answered as the full kc takes it without a change or an error. Returns, having
    /// touched nothing, where the full kc must run as it came; hands over itself, with
    /// the input it read, where it read and cannot answer.
    func serveGet(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                  environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) {
        guard isPlainGet(argc: argc, argv: argv),
              InitialUserNamespace.contains == true, let vaultRoot = Vault.defaultRoot, Vault.isAbsent(at: vaultRoot)
        else { return }
        // The full kc turns core dumps off before anything (Sources/kc/KC.swift).
        let callersLimit = CoreDumps.disable()
        guard var input = HelperStandardInput(capacity: inputLimit + 1) else {
            CoreDumps.restore(callersLimit)
            return
        }
        if let error = input.read(stoppingAtBlankLine: self == .git) {
            input.discard()
            fail("cannot read standard input", error)
        }
        var outcome = HelperOutcome.handOver
        if input.count <= inputLimit {
            switch self {
            case .git: outcome = GitCredentialGet.serve(input.bytes, vaultRoot: vaultRoot)
            case .docker: outcome = DockerCredentialGet.serve(input.bytes, vaultRoot: vaultRoot)
            }
        }
        if case .exit(let status) = outcome {
            input.discard()
            exit(status)
        }
        // Over-long, or not certain: the full kc reads what the front read and decides.
        input.handOver(callersLimit: callersLimit, reportingAs: self, argv: argv, environment: environment)
    }

    /// `git-credential-kc get` or `git-credential-kc --access LEVEL get` with a level the
    /// full kc takes (it reads no level for get); `docker-credential-kc get`.
    private func isPlainGet(argc: Int32, argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Bool {
        guard let action = argv[Int(argc) - 1], strcmp(action, "get") == 0 else { return false }
        if argc == 2 { return true }
        guard self == .git, argc == 4, let option = argv[1], let level = argv[2], strcmp(option, "--access") == 0
        else { return false }
        return strcmp(level, "when-unlocked") == 0 || strcmp(level, "after-first-unlock") == 0 || strcmp(level, "always") == 0
    }

    /// Says that `what` failed and why, as the helper says its own failures, and exits:
    /// git's `kc: git-credential-kc: WHAT: REASON` on standard error, exit 2; docker's
    /// `kc: WHAT: REASON` on standard output (where its clients read errors), exit 1.
    /// For a read of standard input that failed, this is the full kc's message.
    fileprivate func fail(_ what: StaticString, _ error: Int32) -> Never {
        var line = ByteText()
        line.append(self == .git ? "kc: git-credential-kc: " : "kc: ")
        line.append(what)
        line.append(": ")
        if let reason = strerror(error) { line.append(reason) }
        line.append("\n")
        line.bytes.withUnsafeBytes { _ = StandardStream.write($0, to: self == .git ? 2 : 1) }
        exit(self == .git ? 2 : 1)
    }
}

/// What the front does once it has read a helper's input.
enum HelperOutcome {
    /// Answered (the answer written): exit with this status.
    case exit(Int32)
    /// The full kc decides, with the input the front read.
    case handOver
}

/// A helper's standard input, read as the full kc reads it (`readStandardInput` in
/// Sources/kc/StandardIO.swift): into a buffer one byte over the limit, each read asking
/// for the rest of it, to the end or (git) to the first empty line, whichever the reads
/// reach first.
struct HelperStandardInput {
    private let base: UnsafeMutablePointer<UInt8>
    private let capacity: Int
    /// The bytes read from descriptor 0: what the full kc must be given on a hand-over.
    private var consumed = 0
    /// The bytes that are the input: up to the empty line, or all that was read.
    private(set) var count = 0

    init?(capacity: Int) {
        // Not zeroed: only what a read wrote is ever looked at (or zeroed), so the pages
        // past it are never touched.
        guard let memory = malloc(capacity) else { return nil }
        base = memory.assumingMemoryBound(to: UInt8.self)
        self.capacity = capacity
    }

    var bytes: UnsafeRawBufferPointer { UnsafeRawBufferPointer(start: base, count: count) }

    /// Reads as the full kc reads; the errno of a read that failed (not EINTR), or nil.
    mutating func read(stoppingAtBlankLine: Bool) -> Int32? {
        while count < capacity {
            let got = CKeyutils.read(0, base + count, capacity - count)
            if got < 0 {
                let error = CKeyutils_errno()
                if error == EINTR { continue }
                return error
            }
            if got == 0 { break }
            let scanFrom = count > 0 ? count - 1 : 0
            count += got
            consumed = count
            if stoppingAtBlankLine, let stop = blankLineEnd(from: scanFrom) {
                count = stop
                break
            }
        }
        return nil
    }

    /// `GitCredentialHelper.blankLineEnd`: the start of the first empty line (a line
    /// feed at the very start or right after another, or a carriage return before it
    /// that follows one) among the bytes from `start`, the byte before a read's first.
    private func blankLineEnd(from start: Int) -> Int? {
        let newline = UInt8(ascii: "\n"), carriageReturn = UInt8(ascii: "\r")
        for index in start..<count where base[index] == newline {
            var lineStart = index
            if lineStart > 0 && base[lineStart - 1] == carriageReturn { lineStart -= 1 }
            if lineStart == 0 || base[lineStart - 1] == newline { return lineStart }
        }
        return nil
    }

    /// Zeroes what was read (it may hold a secret) and frees the buffer.
    func discard() {
        explicit_bzero(base, consumed)
        free(base)
    }

    /// Executes the full kc with every byte read from descriptor 0 as its standard input,
    /// from the start, in an anonymous file in memory: it reads them as it would have
    /// read them, stops where the front stopped, and decides. Argv, the environment,
    /// every other descriptor and the core-file limit are as they came.
    func handOver(callersLimit: rlimit, reportingAs helper: CredentialHelper,
                  argv: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>,
                  environment: UnsafeMutablePointer<UnsafeMutablePointer<CChar>?>) -> Never {
        let error = StandardInput.replace(with: UnsafeRawBufferPointer(start: base, count: consumed))
        discard()
        // Only without memory or a descriptor to spare: the one message the full kc never gives.
        if let error { helper.fail("cannot hand the input to the full kc", error) }
        CoreDumps.restore(callersLimit)
        FullKC.run(argv: argv, environment: environment)
    }
}

// MARK: git-credential-kc get

/// `git-credential-kc get` (Sources/kc/GitCredentialCommand.swift,
/// `GitCredentialHelper.parse` and `get`): the remote's service, the user git names or
/// the only one stored, and that user's password (and refresh token), read where the
/// full kc reads them.
enum GitCredentialGet {
    /// What git sent that the answer depends on.
    private struct Request {
        var protocolName: [UInt8]? = nil
        var host: [UInt8]? = nil
        var path: [UInt8]? = nil
        var username: [UInt8]? = nil
    }

    /// The answer if it is certain (written, with the status to exit with), else `handOver`.
    static func serve(_ input: UnsafeRawBufferPointer, vaultRoot: ByteText) -> HelperOutcome {
        guard let request = parse(input) else { return .handOver }
        // Nothing to answer for (no protocol, no host or path, a host with a `/`, a name
        // too long): the full kc answers nothing and exits 0 without a keyring call.
        guard let service = serviceName(for: request) else { return .exit(0) }
        var keyrings = CredentialService(service, vaultRoot: vaultRoot)
        // /proc/keys before anything else: the probe of every level links the persistent
        // keyring into a thread keyring, and then the kernel's possession check for each
        // key it lists searches that too (the read cost twice as much). Only a password
        // at home needs it, so only with a home keyring.
        let procKeys = keyrings.hasHomeKeyring ? ProcKeys.read() : nil
        let user: [UInt8]
        if let asked = request.username, !asked.isEmpty {
            user = asked
        } else {
            guard let users = storedUsers(in: &keyrings) else { return .handOver }
            // Several: the one stored last (`%latest`) is the full kc's to read.
            guard users.count <= 1 else { return .handOver }
            guard let only = users.first else { return .exit(0) }
            user = only
        }
        guard let (passwordName, refreshName) = GitCredentialNames.items(forUser: user) else { return .exit(0) }

        let password = keyrings.lookup(passwordName)
        if case .uncertain = password { return .handOver }
        let refreshToken = keyrings.lookup(refreshName)
        if case .uncertain = refreshToken { return .handOver }
        // A user with nothing stored: no answer, so git asks on.
        if case .nowhere = password, case .nowhere = refreshToken { return .exit(0) }
        // The full kc shows a deadline where /proc/keys shows one; the front answers
        // only for a password without one.
        if case .atHome(let key) = password, !(procKeys.map { ProcKeys.showsNoExpiry(of: key, in: $0) } ?? false) {
            return .handOver
        }

        let answered = ItemValue.withValue(of: password) { passwordValue in
            ItemValue.withValue(of: refreshToken) { refreshValue in
                answer(user: user, password: passwordValue, refreshToken: refreshValue)
            }
        }
        return answered.flatMap { $0 } ?? .handOver
    }

    /// `username=`, `password=` and `oauth_refresh_token=` lines, written in one write;
    /// `handOver` if a value holds a line feed or a NUL, which the full kc refuses with
    /// a message.
    private static func answer(user: [UInt8], password: UnsafeRawBufferPointer?, refreshToken: UnsafeRawBufferPointer?) -> HelperOutcome {
        let carriable = { (value: UnsafeRawBufferPointer) in !value.contains(UInt8(ascii: "\n")) && !value.contains(0) }
        let userCarriable = user.withUnsafeBytes { carriable($0) }
        guard userCarriable, password.map(carriable) ?? true, refreshToken.map(carriable) ?? true else { return .handOver }
        var output: [UInt8] = []
        // Room for every line up front: a reallocation would leave a copy of a secret.
        output.reserveCapacity(user.count + (password?.count ?? 0) + (refreshToken?.count ?? 0) + 64)
        appendLine("username=", UnsafeRawBufferPointer?.none, user, to: &output)
        if let password { appendLine("password=", password, nil, to: &output) }
        if let refreshToken { appendLine("oauth_refresh_token=", refreshToken, nil, to: &output) }
        let written = output.withUnsafeBytes { StandardStream.write($0, to: 1) }
        output.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
        guard written else {
            StandardStream.report("kc: git-credential-kc: cannot write to standard output\n")
            return .exit(2)
        }
        return .exit(0)
    }

    private static func appendLine(_ key: StaticString, _ value: UnsafeRawBufferPointer?, _ bytes: [UInt8]?,
                                   to output: inout [UInt8]) {
        output.append(contentsOf: UnsafeBufferPointer(start: key.utf8Start, count: key.utf8CodeUnitCount))
        if let value { output.append(contentsOf: value) }
        if let bytes { output.append(contentsOf: bytes) }
        output.append(UInt8(ascii: "\n"))
    }

    /// The request, parsed as `GitCredentialHelper.parse` parses it: `key=value` lines, a
    /// final carriage return dropped, empty lines skipped, unknown keys ignored. Nil
    /// where the full kc fails (a NUL, a line without `=`) or where a line carries what
    /// the front leaves to it: `url=` (its own parser), `password=`,
    /// `oauth_refresh_token=`, `password_expiry_utc=` (secrets, and a number to check).
    private static func parse(_ input: UnsafeRawBufferPointer) -> Request? {
        var request = Request()
        var leftToTheFullKC = false
        let error = GitCredentialNames.forEachAttribute(in: input) { key, value in
            if key.equals("protocol") {
                request.protocolName = Array(value)
            } else if key.equals("host") {
                request.host = Array(value)
            } else if key.equals("path") {
                request.path = Array(value)
            } else if key.equals("username") {
                request.username = Array(value)
            } else if key.equals("password") || key.equals("oauth_refresh_token")
                        || key.equals("password_expiry_utc") || key.equals("url") {
                leftToTheFullKC = true
                return false
            }
            return true
        }
        return error == nil && !leftToTheFullKC ? request : nil
    }

    /// `git:PROTOCOL:HOST[%2FPATH]` (the core's ``GitCredentialNames/service(protocolName:host:path:)``).
    private static func serviceName(for request: Request) -> [UInt8]? {
        GitCredentialNames.service(protocolName: request.protocolName, host: request.host, path: request.path)
    }

    /// `GitCredentialHelper.storedUsers`: the users with a password or refresh token in
    /// the service (names this helper made), in the listing's order; nil if the listing
    /// is not certain.
    private static func storedUsers(in keyrings: inout CredentialService) -> [[UInt8]]? {
        guard let names = keyrings.itemNames() else { return nil }
        var users: [[UInt8]] = []
        for name in names {
            guard let user = GitCredentialNames.user(ofItem: name), !users.contains(user) else { continue }
            users.append(user)
        }
        return users
    }
}

// MARK: docker-credential-kc get

/// `docker-credential-kc get` (Sources/kc/DockerCredentialCommand.swift,
/// `DockerCredentialHelper.get`): the server's service, its first item whose name this
/// helper made, as JSON.
enum DockerCredentialGet {
    /// The answer (or "not found") if it is certain (written, with the status to exit
    /// with), else `handOver`.
    static func serve(_ input: UnsafeRawBufferPointer, vaultRoot: ByteText) -> HelperOutcome {
        // `serverURL(in:)`: without the white space around it; none at all is an error.
        guard let range = DockerCredentialNames.serverRange(in: input) else { return .handOver }
        let server = Array(input[range])
        guard let service = DockerCredentialNames.service(server: server) else { return .handOver }
        var keyrings = CredentialService(service, vaultRoot: vaultRoot)
        guard let names = keyrings.itemNames() else { return .handOver }
        for name in names {
            guard let user = CredentialNameCodec.decode(name) else { continue }
            // A name the full kc refuses to read (made with keyctl) is its to report.
            guard NameRules.isValid(name) else { return .handOver }
            let found = keyrings.lookup(name)
            switch found {
            case .uncertain: return .handOver
            case .nowhere: continue
            case .atHome: return ItemValue.withValue(of: found) { answer(server: server, user: user, secret: $0) } ?? .handOver
            }
        }
        let notFound: StaticString = "credentials not found in native keychain\n"
        _ = StandardStream.write(UnsafeRawBufferPointer(start: notFound.utf8Start, count: notFound.utf8CodeUnitCount), to: 1)
        return .exit(1)
    }

    /// `{"ServerURL":...,"Username":...,"Secret":...}` and a line feed (exit 0, or 1 if
    /// it cannot be written); `handOver` if a part is not UTF-8.
    private static func answer(server: [UInt8], user: [UInt8], secret: UnsafeRawBufferPointer?) -> HelperOutcome {
        guard let secret else { return .handOver }
        var output: [UInt8] = []
        // Room for the longest escaping up front: a reallocation would leave a copy.
        output.reserveCapacity((secret.count + server.count + user.count) * 6 + 64)
        output.append(contentsOf: byteArray(#"{"ServerURL":"#))
        guard server.withUnsafeBytes({ JSONString.append($0, to: &output) }) else { return .handOver }
        output.append(contentsOf: byteArray(#","Username":"#))
        guard user.withUnsafeBytes({ JSONString.append($0, to: &output) }) else { return .handOver }
        output.append(contentsOf: byteArray(#","Secret":"#))
        guard JSONString.append(secret, to: &output) else {
            output.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
            return .handOver
        }
        output.append(contentsOf: byteArray("}\n"))
        let written = output.withUnsafeBytes { StandardStream.write($0, to: 1) }
        output.withUnsafeMutableBytes { if let base = $0.baseAddress { explicit_bzero(base, $0.count) } }
        return .exit(written ? 0 : 1)
    }
}

// MARK: Names, items, listings

/// Where an item is, found as the full kc's read finds it (`OwnService.locate`): in the
/// service's keyring at its home level, else nowhere at any level (no vault, which the
/// caller made sure of). Anything else (found at another level, a keyring to repair, a
/// failed call) is the full kc's.
enum ItemLookup {
    case atHome(Int32)
    case nowhere
    case uncertain
}

/// A service's keyrings, found once as the full kc finds them, for the lookups and the
/// listing one answer makes.
struct CredentialService {
    private var name = ByteText()
    /// Where the vault would be: there is none (the caller made sure).
    private let vaultRoot: ByteText
    /// The home keyring: the session keyring's `kc:SERVICE`, the owner and mask checked.
    private let home: KernelSearch
    /// Every keyring of the service at every level (the full kc's probe) and whether it
    /// is linked in its anchor directly; made on first use, and nil inside if the probe
    /// was not certain.
    private var probed: [(ring: Int32, linkedDirectly: Bool)]?? = nil

    init(_ service: [UInt8], vaultRoot: ByteText) {
        self.vaultRoot = vaultRoot
        name.append(service)
        home = name.withCString { ServiceKeyringProbe.find($0, prefix: "kc:", under: KEY_SPEC_SESSION_KEYRING) }
    }

    /// Whether the session keyring's search found the service's keyring (the owner and
    /// mask as kc makes them).
    var hasHomeKeyring: Bool {
        if case .found = home { return true }
        return false
    }

    private mutating func rings() -> [(ring: Int32, linkedDirectly: Bool)]? {
        if let probed { return probed }
        var found: [(ring: Int32, linkedDirectly: Bool)] = []
        let certain = name.withCString { service in
            ServiceKeyringProbe.probe(service) { ring, linkedDirectly in
                found.append((ring, linkedDirectly))
                return true
            }
        }
        let rings = certain ? found : nil
        probed = .some(rings)
        return rings
    }

    /// The item: a search of the home keyring, and where it is not there, of every
    /// other keyring of the service.
    mutating func lookup(_ item: [UInt8]) -> ItemLookup {
        var itemText = ByteText()
        itemText.append(item)
        var homeRing: Int32? = nil
        switch home {
        case .uncertain: return .uncertain
        case .absent: break
        case .found(let ring):
            homeRing = ring
            switch itemText.withCString({ KernelSearch(in: ring, type: "user", description: $0) }) {
            case .found(let key): return .atHome(key)
            case .uncertain: return .uncertain
            case .absent: break
            }
        }
        guard let rings = rings() else { return .uncertain }
        for (ring, _) in rings where ring != homeRing {
            guard case .absent = itemText.withCString({ KernelSearch(in: ring, type: "user", description: $0) }) else { return .uncertain }
        }
        return .nowhere
    }

    /// The item names `Keychain.allKeyNames()` lists (`ServiceRings.itemNames(checkingSize:
    /// false)`, no vault to load from): the `user` keys linked in each of the service's keyrings that is linked
    /// in its anchor directly, sorted by their bytes. Nil where the full kc would change
    /// something (unlink another uid's key or one that cannot be described) or report an
    /// error.
    mutating func itemNames() -> [[UInt8]]? {
        // A listing, and only a listing, also asks whether the vault's key is stashed
        // (`Vault.loadMissing`, through `Vault.forWriting`); only a search the kernel
        // refuses would make the full kc do more.
        guard Vault.stashSearchIsPlain(at: vaultRoot), let rings = rings() else { return nil }
        var names: [[UInt8]] = []
        for (ring, linkedDirectly) in rings where linkedDirectly {
            guard ServiceKeyringProbe.appendUserKeyNames(of: ring, to: &names, checkingSize: false) else { return nil }
        }
        names.sort { $0.lexicographicallyPrecedes($1) }
        return names
    }
}

/// An item's value, read once into a buffer that is zeroed after.
enum ItemValue {
    /// Calls `body` with the value of the item found at home (nil for an item that is
    /// nowhere), then zeroes it. Nil without calling `body` if the read fails (the key
    /// went since the search, or was refused): the full kc decides.
    static func withValue<Result>(of lookup: ItemLookup, _ body: (UnsafeRawBufferPointer?) -> Result) -> Result? {
        guard case .atHome(let key) = lookup else { return body(nil) }
        // A `user` key holds at most 32767 bytes: one read takes any value whole.
        return withUnsafeTemporaryAllocation(byteCount: 32768, alignment: 8) { buffer -> Result? in
            guard let base = buffer.baseAddress else { return nil }
            let length = keyctl_read(key, base.assumingMemoryBound(to: CChar.self), buffer.count)
            // One NUL byte may be a key marked empty (Sources/Keyrings/ItemValue.swift): the full kc decides.
            guard length >= 0 && length <= buffer.count && !(length == 1 && base.load(as: UInt8.self) == 0) else {
                if length > 0 { explicit_bzero(base, buffer.count) }
                return nil
            }
            let result = body(UnsafeRawBufferPointer(start: base, count: length))
            explicit_bzero(base, length)
            return result
        }
    }
}

/// /proc/keys, read as the full kc reads an item's deadline (`DeadlineRecords.deadline(of:)`).
enum ProcKeys {
    /// The whole file, or nil if it cannot be read.
    static func read() -> [UInt8]? {
        FileBytes.read("/proc/keys", followingLinks: false, limit: Int.max)
    }

    /// Whether the key's line in `text` (``read()``) shows `perm` (no expiry): then the
    /// full kc shows no deadline. False for anything else (an expiry, no line).
    static func showsNoExpiry(of key: Int32, in text: [UInt8]) -> Bool {
        var shown: ProcKeysLine.Expiry? = nil
        text.withUnsafeBytes { text in
            ProcKeysLine.forEach(in: text) { line in
                guard line.serial == UInt32(bitPattern: key) else { return true }
                shown = line.expiry
                return false
            }
        }
        return shown == .never
    }
}

private extension UnsafeRawBufferPointer {
    /// Whether these are exactly the bytes of `text`.
    func equals(_ text: StaticString) -> Bool {
        guard count == text.utf8CodeUnitCount else { return false }
        guard let baseAddress else { return true }  // both empty
        return memcmp(baseAddress, text.utf8Start, count) == 0
    }
}

private func byteArray(_ text: StaticString) -> [UInt8] {
    Array(UnsafeBufferPointer(start: text.utf8Start, count: text.utf8CodeUnitCount))
}
