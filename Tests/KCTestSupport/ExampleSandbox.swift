import Foundation
import KernelKeychain

#if canImport(Glibc)
import Glibc
#endif

// Runs the docs' example blocks (DocumentedExamples.swift reads them) the way a reader
// would type them, in a sandbox: throwaway accounts with fresh keyrings, a home folder
// and $XDG_RUNTIME_DIR of their own, the built kc first on PATH. docs/EXAMPLES.md says
// what a block can count on.

/// What one block did: a mismatch or a failure per step, or why it did not run.
public struct ExampleOutcome: Sendable {
    public var block: String
    public var skipped: String?
    public var failures: [String] = []
}

/// What every block shares, made once per test process: the folder, PATH's programs, the
/// python keyring backend and a copy of the files of the repository the docs name.
public final class ExampleEnvironment {
    /// `/tmp/kc-test-docs-PID`: removed at the end of the run (TestRunCleanup).
    public let root: String
    public let bin: String
    /// Where the documented pip command installed the python keyring backend, or nil.
    public private(set) var python: String?
    public private(set) var pythonProblem: String?

    /// The throwaway account a `$ ` prompt runs as; `NAME$ ` runs as `kc-docs-NAME`.
    public static let account = "kc-docs"
    public static func account(for name: String) -> String { "kc-docs-" + name }

    public init() throws {
        root = "/tmp/kc-test-docs-\(getpid())"
        bin = root + "/bin"
        if FileOps.exists(root) { _ = try runCommand("/bin/rm", ["-rf", root]) }
        for folder in [root, bin, root + "/repository", root + "/no-host-key"] {
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
        }
        // kc as setup.sh installs it: kc, its mount daemon beside it, and the helpers as
        // links to kc (copies every account may run: the build folder may be private).
        let built = URL(fileURLWithPath: UnprivilegedUser.kcCopy).deletingLastPathComponent().path
        for (name, target) in [("kc", "kc"), ("kc-mountd", "kc-mountd"),
                               ("git-credential-kc", "kc"), ("docker-credential-kc", "kc")] {
            try FileManager.default.createSymbolicLink(atPath: bin + "/" + name, withDestinationPath: built + "/" + target)
        }
        try FileManager.default.copyItem(atPath: DocumentedExamples.checkout + "/Integrations",
                                         toPath: root + "/repository/Integrations")
        _ = try runCommand("/bin/chmod", ["-R", "a+rX", root + "/repository"])
        installPythonBackend()
    }

    /// The pip command docs/INTEGRATIONS.md gives, as written but for `sudo` and with
    /// `--target` (a folder of the sandbox's, not the system's python), run in the checkout.
    public static func documentedPipCommand() throws -> String? {
        let text = try String(contentsOfFile: DocumentedExamples.checkout + "/docs/INTEGRATIONS.md", encoding: .utf8)
        return text.components(separatedBy: "\n").first { $0.contains("python3 -m pip install") && $0.contains("Integrations/python") }
            .map { $0.trimmingCharacters(in: .whitespaces) }
    }

    public static func runDocumentedPipCommand(target: String) throws -> CommandResult {
        guard var command = try documentedPipCommand() else {
            return CommandResult(status: 127, standardOutput: [], standardError: "docs/INTEGRATIONS.md gives no pip command for Integrations/python")
        }
        if command.hasPrefix("sudo ") { command.removeFirst(5) }
        let home = target + ".home"
        try? FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: home) }
        let script = "cd '\(DocumentedExamples.checkout)' && \(command) --quiet --disable-pip-version-check --no-cache-dir --target '\(target)'"
        return try runCommand("/bin/sh", ["-c", script], environment: ["PATH": "/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8"])
    }

    private func installPythonBackend() {
        guard (try? runCommand("/usr/bin/python3", ["-m", "pip", "--version"]))?.status == 0 else {
            pythonProblem = "pip is not installed for /usr/bin/python3 (Debian's python3-pip)"
            return
        }
        let target = root + "/python"
        do {
            let result = try Self.runDocumentedPipCommand(target: target)
            guard result.status == 0 else {
                pythonProblem = "the documented pip install failed: \(result)"
                return
            }
            _ = try runCommand("/bin/chmod", ["-R", "a+rX", target])
            python = target
        } catch {
            pythonProblem = "the documented pip install failed: \(error)"
        }
    }

    public func remove() {
        _ = try? runCommand("/bin/rm", ["-rf", root])
    }
}

/// Throwaway accounts and groups for the examples: made once, kept (as the suite's other
/// test users are), their keyrings emptied before and after each block.
enum ExampleAccounts {
    nonisolated(unsafe) private static var known: [String: UInt32] = [:]

    /// The account's uid, made if missing; nil if it cannot be made.
    static func ensure(_ name: String) -> UInt32? {
        if let uid = known[name] { return uid }
        if (try? runCommand("/usr/bin/id", ["-u", name]))?.status != 0 {
            _ = try? runCommand("/usr/sbin/useradd", ["--system", "--no-create-home", "--shell", "/usr/sbin/nologin", name])
        }
        guard let output = try? runCommand("/usr/bin/id", ["-u", name]), output.status == 0,
              let uid = UInt32(output.output.trimmingCharacters(in: .whitespacesAndNewlines)) else { return nil }
        known[name] = uid
        _ = UnprivilegedUser.grantFUSEDevice(to: name)
        return uid
    }

    static func ensureGroup(_ name: String) -> Bool {
        if (try? runCommand("/usr/bin/getent", ["group", name]))?.status == 0 { return true }
        return (try? runCommand("/usr/sbin/groupadd", ["--system", name]))?.status == 0
    }

    /// Makes `groups` the account's supplementary groups, and no others.
    static func setGroups(_ account: String, _ groups: [String]) -> Bool {
        (try? runCommand("/usr/sbin/usermod", ["-G", groups.sorted().joined(separator: ","), account]))?.status == 0
    }

    /// Empties the account's user and persistent keyrings (its session keyrings die with
    /// the block's shells).
    static func clearKeyrings(_ account: String) {
        _ = try? runCommand("/usr/sbin/runuser", ["-u", account, "--", "keyctl", "session", "-", "/bin/sh", "-c",
                                                  "keyctl clear @u; keyctl clear $(keyctl get_persistent @s) 2>/dev/null; true"])
    }
}

/// A bash of one user of a block, reading one command at a time, as a terminal's shell
/// would: its variables, folder and session keyring carry from one command to the next.
/// Each command's standard output and error come through one pipe, in the order written.
final class ExampleShell {
    let pid: pid_t
    private var commands: Int32
    private let output: Int32
    private var terminalMaster: Int32 = -1
    private let typed: String?
    private var buffer: [UInt8] = []

    /// TIOCSPTLCK and TIOCGPTN (asm-generic/ioctls.h).
    private static let unlockTerminal: UInt = 0x4004_5431
    private static let terminalNumber: UInt = 0x8004_5430

    private static let done = Array("\u{1e}kc-example-done ".utf8)
    private static let ready = Array("\u{1e}kc-example-ready\u{1e}\n".utf8)

    /// `account` nil: as the caller (root). With `typed`, standard input of each command
    /// is a pseudo-terminal, and `typed` is typed at each prompt.
    init(account: String?, environment: [String: String], typed: String?) throws {
        self.typed = typed
        var inputName = "/dev/null"
        if typed != nil {
            // posix_openpt and its friends are not in Swift's Glibc: /dev/ptmx and two ioctls.
            terminalMaster = open("/dev/ptmx", O_RDWR | O_NOCTTY)
            var unlock: CInt = 0, number: CInt = 0
            guard terminalMaster >= 0, ioctl(terminalMaster, Self.unlockTerminal, &unlock) == 0,
                  ioctl(terminalMaster, Self.terminalNumber, &number) == 0 else { throw Self.error("a pseudo-terminal") }
            inputName = "/dev/pts/\(number)"
            _ = fcntl(terminalMaster, F_SETFD, FD_CLOEXEC)
            if let account, let uid = ExampleAccounts.ensure(account) { chown(inputName, uid, gid_t.max) }
        }
        let loop = """
            __kc_input='\(inputName)'
            printf '\\036kc-example-ready\\036\\n'
            while IFS= read -r -d '' __kc_command; do
                eval "$__kc_command" < "$__kc_input"
                printf '\\036kc-example-done %d\\036\\n' "$?"
            done
            """
        let variables = environment.sorted { $0.key < $1.key }.map { "\($0.key)=\($0.value)" }
        var arguments = ["/usr/bin/env", "-i"] + variables + ["/usr/bin/keyctl", "session", "-",
                                                              "/bin/bash", "--noprofile", "--norc", "-c", loop]
        if let account { arguments = ["/usr/sbin/runuser", "-u", account, "--"] + arguments }
        // Commands go through a socket, so a shell that died is an error here (send's
        // MSG_NOSIGNAL), not a SIGPIPE that would end the test process.
        var commandPipe: [Int32] = [0, 0], outputPipe: [Int32] = [0, 0]
        guard socketpair(AF_UNIX, Int32(SOCK_STREAM.rawValue), 0, &commandPipe) == 0, pipe(&outputPipe) == 0 else {
            throw Self.error("socketpair")
        }
        for fd in commandPipe + outputPipe { _ = fcntl(fd, F_SETFD, FD_CLOEXEC) }
        var actions = posix_spawn_file_actions_t()
        posix_spawn_file_actions_init(&actions)
        defer { posix_spawn_file_actions_destroy(&actions) }
        posix_spawn_file_actions_adddup2(&actions, commandPipe[0], 0)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 1)
        posix_spawn_file_actions_adddup2(&actions, outputPipe[1], 2)
        var argv: [UnsafeMutablePointer<CChar>?] = arguments.map { strdup($0) } + [nil]
        defer { for pointer in argv { free(pointer) } }
        var child: pid_t = 0
        let spawned = posix_spawn(&child, arguments[0], &actions, nil, &argv, environ)
        Glibc.close(commandPipe[0])
        Glibc.close(outputPipe[1])
        guard spawned == 0 else {
            Glibc.close(commandPipe[1]); Glibc.close(outputPipe[0])
            throw Self.error("posix_spawn \(arguments[0])")
        }
        pid = child
        commands = commandPipe[1]
        output = outputPipe[0]
        // Whatever comes before the loop starts (keyctl's "Joined session keyring") is not
        // a command's output.
        guard let start = try readUntil(Self.ready, timeout: 30) else {
            throw Self.error("the shell did not start: \(String(decoding: buffer, as: UTF8.self))")
        }
        buffer.removeFirst(start + Self.ready.count)
    }

    /// Runs one command: what it printed, and its exit status (nil if it did not end
    /// within `timeout` seconds).
    func run(_ command: String, timeout: Double = 120) throws -> (output: String, status: Int32?) {
        let bytes = Array(command.utf8) + [0]
        let written = bytes.withUnsafeBytes { send(commands, $0.baseAddress, $0.count, Int32(MSG_NOSIGNAL)) }
        guard written == bytes.count else { throw Self.error("the shell stopped reading commands") }
        // The marker is "\u{1e}kc-example-done STATUS\u{1e}\n".
        guard let end = try readUntil(Self.done, timeout: timeout),
              let close = try readUntil([0x1e, 0x0a], from: end + Self.done.count, timeout: 5) else {
            let partial = String(decoding: buffer, as: UTF8.self)
            buffer = []
            return (partial, nil)
        }
        let status = Int32(String(decoding: buffer[(end + Self.done.count)..<close], as: UTF8.self))
        let printed = String(decoding: buffer[..<end], as: UTF8.self)
        buffer.removeFirst(close + 2)
        return (printed, status)
    }

    /// Reads until `marker` is in the buffer at or after `start`: its offset, or nil at the
    /// timeout or when the shell is gone.
    private func readUntil(_ marker: [UInt8], from start: Int = 0, timeout: Double) throws -> Int? {
        let deadline = Date().addingTimeInterval(timeout)
        var answeredAt = -1
        while true {
            if buffer.count >= start, let found = buffer[start...].firstRange(of: marker)?.lowerBound { return found }
            answerPrompt(&answeredAt)
            let left = deadline.timeIntervalSinceNow
            guard left > 0 else { return nil }
            if try !readMore(timeout: min(left, 0.2)), !isRunning {
                while try readMore(timeout: 0.05) {}
                return buffer.count >= start ? buffer[start...].firstRange(of: marker)?.lowerBound : nil
            }
        }
    }

    /// At a terminal, types the block's text when the output waits after `: ` (a prompt).
    private func answerPrompt(_ answeredAt: inout Int) {
        guard let typed, terminalMaster >= 0, buffer.count > answeredAt,
              buffer.suffix(2) == [0x3a, 0x20] else { return }
        answeredAt = buffer.count
        let line = Array((typed + "\n").utf8)
        _ = line.withUnsafeBytes { Glibc.write(terminalMaster, $0.baseAddress, $0.count) }
    }

    /// Appends what is there to read within `timeout`; false if nothing came.
    private func readMore(timeout: Double) throws -> Bool {
        var descriptor = pollfd(fd: output, events: Int16(POLLIN), revents: 0)
        let ready = poll(&descriptor, 1, Int32(timeout * 1000))
        guard ready > 0 else { return false }
        var chunk = [UInt8](repeating: 0, count: 65536)
        let count = chunk.withUnsafeMutableBytes { Glibc.read(output, $0.baseAddress, $0.count) }
        guard count > 0 else { return false }
        buffer.append(contentsOf: chunk[..<count])
        return true
    }

    var isRunning: Bool { kill(pid, 0) == 0 && !isZombie(pid) }

    /// Ends the shell (and, by the caller, what it started): no more commands, then the
    /// shell's own exit.
    func close() {
        if commands >= 0 { Glibc.close(commands); commands = -1 }
        for _ in 0..<50 where waitpid(pid, nil, WNOHANG) == 0 { usleep(20_000) }
        if waitpid(pid, nil, WNOHANG) == 0 {
            kill(pid, SIGKILL)
            waitpid(pid, nil, 0)
        }
        Glibc.close(output)
        if terminalMaster >= 0 { Glibc.close(terminalMaster); terminalMaster = -1 }
    }

    private static func error(_ what: String) -> NSError {
        NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: what])
    }
}

private func isZombie(_ pid: pid_t) -> Bool {
    guard let stat = readWholeFile("/proc/\(pid)/stat"), let close = stat.lastIndex(of: ")") else { return true }
    return stat[stat.index(close, offsetBy: 2)...].first == "Z"
}

/// Every live process below `pid` (by parent pid, read from /proc).
func descendants(of pid: pid_t) -> [pid_t] {
    var parents: [pid_t: [pid_t]] = [:]
    for name in (try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? [] {
        guard let child = pid_t(name), let stat = readWholeFile("/proc/\(name)/stat"),
              let close = stat.lastIndex(of: ")") else { continue }
        let fields = stat[stat.index(after: close)...].split(separator: " ")
        if fields.count > 1, let parent = pid_t(fields[1]) { parents[parent, default: []].append(child) }
    }
    var found: [pid_t] = []
    var queue = [pid]
    while let next = queue.popLast() {
        for child in parents[next] ?? [] { found.append(child); queue.append(child) }
    }
    return found
}

/// The pids of the processes of `uid`.
func processes(of uid: UInt32) -> [pid_t] {
    ((try? FileManager.default.contentsOfDirectory(atPath: "/proc")) ?? []).compactMap { name in
        guard let pid = pid_t(name), let status = readWholeFile("/proc/\(name)/status"),
              let line = status.split(separator: "\n").first(where: { $0.hasPrefix("Uid:") }),
              let real = line.split(separator: "\t").dropFirst().first, UInt32(real) == uid else { return nil }
        return pid
    }
}

/// The sandbox of one block, or of a block and those that continue it: the shells of its
/// users, their homes, and what must be undone afterwards.
public final class ExampleSandbox {
    let environment: ExampleEnvironment
    /// Every folder of the sandbox starts so: each user's home is a folder of its own in
    /// /tmp, `PREFIX-LABEL-PID`, as the vault wants the first folder in a shared sticky
    /// one to be the user's (and TestRunCleanup removes `kc-test-*-PID` ones).
    let prefix: String
    let asRoot: Bool
    let typed: String?
    /// Shells by the docs' user name ("" for `$`).
    private var shells: [String: ExampleShell] = [:]
    private var accountsUsed: Set<String> = []
    private var homesMade: [String?] = []
    private var rootServicesBefore: Set<String> = []
    /// The services root had when the sandbox began (as-root blocks only).
    var rootServicesAtStart: Set<String> { rootServicesBefore }
    nonisolated(unsafe) private static var counter = 0

    init(environment: ExampleEnvironment, first block: ExampleBlock) throws {
        self.environment = environment
        Self.counter += 1
        prefix = "/tmp/kc-test-docs-\(Self.counter)-"
        asRoot = block.asRoot
        typed = block.typed
        if asRoot { rootServicesBefore = Self.rootServices() }
    }

    /// The account a docs user runs as (nil: the caller, root).
    func account(for user: String?) -> String? {
        guard let user else { return asRoot ? nil : ExampleEnvironment.account }
        return ExampleEnvironment.account(for: user)
    }

    func home(for user: String?) -> String { prefix + (user ?? "you") + "-\(getpid())" }

    /// The shell of a docs user, started on first use with a fresh session keyring, and
    /// its account's user and persistent keyrings emptied.
    func shell(for user: String?) throws -> ExampleShell {
        if let shell = shells[user ?? ""] { return shell }
        let account = account(for: user)
        var owner: (uid_t, gid_t)? = nil
        if let account {
            guard let uid = ExampleAccounts.ensure(account) else {
                throw NSError(domain: "ExampleSandbox", code: 1, userInfo: [NSLocalizedDescriptionKey: "cannot make the account \(account)"])
            }
            if !accountsUsed.contains(account) {
                ExampleAccounts.clearKeyrings(account)
                accountsUsed.insert(account)
            }
            owner = (uid, getpwuid(uid).map { $0.pointee.pw_gid } ?? gid_t(uid))
        }
        let home = home(for: user)
        homesMade.append(user)
        let runtime = home + "/.run"
        for (path, mode) in [(home, 0o755), (runtime, 0o700)] where !FileOps.exists(path) {
            mkdir(path, mode_t(mode))
            chmod(path, mode_t(mode))
            if let owner { chown(path, owner.0, owner.1) }
        }
        var variables = [
            "HOME": home, "USER": account ?? "root", "LOGNAME": account ?? "root", "SHELL": "/bin/bash",
            "PATH": "\(environment.bin):\(home)/.local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
            "LANG": "C.UTF-8", "XDG_RUNTIME_DIR": runtime, "GIT_CONFIG_NOSYSTEM": "1",
            "KC_HOST_KEY_DIR": environment.root + "/no-host-key",
            "KC_REPOSITORY": environment.root + "/repository",
        ]
        if let python = environment.python { variables["PYTHONPATH"] = python }
        let shell = try ExampleShell(account: account, environment: variables, typed: typed)
        _ = try shell.run("cd ~")
        shells[user ?? ""] = shell
        return shell
    }

    /// Writes a file of the block into the `$` user's home.
    func write(_ file: ExampleFile) throws {
        var relative = file.path
        if relative.hasPrefix("~/") { relative.removeFirst(2) }
        let path = home(for: nil) + "/" + relative
        _ = try shell(for: nil)
        let directory = URL(fileURLWithPath: path).deletingLastPathComponent().path
        try FileManager.default.createDirectory(atPath: directory, withIntermediateDirectories: true)
        try file.contents.write(toFile: path, atomically: false, encoding: .utf8)
        chmod(path, file.executable ? 0o755 : 0o644)
        if let account = account(for: nil) {
            _ = try runCommand("/bin/chown", ["-R", account + ":", home(for: nil)])
        }
    }

    /// Undoes the sandbox: its mounts (daemons resumed and stopped), its processes, its
    /// keys (throwaway accounts' keyrings emptied; services root did not have before
    /// removed), and its folders.
    func tearDown() {
        let mounts = Self.mountPoints(under: prefix)
        var daemons: [pid_t] = []
        for mount in mounts {
            if let daemon = daemonProcess(serving: mount) { daemons.append(daemon); kill(daemon, SIGCONT) }
        }
        var started: [pid_t] = []
        for shell in shells.values { started += descendants(of: shell.pid) }
        for mount in mounts { forceUnmount(mount) }
        for daemon in daemons { kill(daemon, SIGTERM) }
        for shell in shells.values { shell.close() }
        shells = [:]
        var leftover = started + daemons
        for account in accountsUsed {
            if let uid = ExampleAccounts.ensure(account) { leftover += processes(of: uid) }
        }
        // SIGTERM first, so a server the block left running removes its socket.
        let alive = { Set(leftover).filter { kill($0, 0) == 0 && !isZombie($0) } }
        for pid in alive() { kill(pid, SIGCONT); kill(pid, SIGTERM) }
        for _ in 0..<20 where !alive().isEmpty { usleep(50_000) }
        for pid in alive() { kill(pid, SIGKILL) }
        for account in accountsUsed { ExampleAccounts.clearKeyrings(account) }
        if asRoot {
            for service in Self.rootServices().subtracting(rootServicesBefore) {
                try? Keychain(service: service).removeAll()
            }
        }
        for mount in Self.mountPoints(under: prefix) { forceUnmount(mount) }
        if Self.mountPoints(under: prefix).isEmpty {
            for user in homesMade { _ = try? runCommand("/bin/rm", ["-rf", home(for: user)]) }
        }
    }

    /// The services root's keychain lists (its user and persistent keyrings, and this
    /// process's session keyring, which the examples never see).
    static func rootServices() -> Set<String> {
        guard let result = try? runCommand(builtKC, ["ls"]), result.status == 0 else { return [] }
        return Set(ExampleOutput.lines(result.output))
    }

    static func mountPoints(under prefix: String) -> [String] {
        guard let table = readWholeFile("/proc/self/mountinfo") else { return [] }
        return table.split(separator: "\n").compactMap { line in
            let fields = line.split(separator: " ")
            guard fields.count > 4, fields[4].hasPrefix(prefix) else { return nil }
            return String(fields[4])
        }.sorted { $0.count > $1.count }
    }
}

/// Runs blocks in order, each in a fresh sandbox unless it `continues` the last one.
public final class ExampleRunner {
    let environment: ExampleEnvironment
    private var sandbox: ExampleSandbox?
    private var requirementCache: [String: Bool] = [:]

    public init(environment: ExampleEnvironment) {
        self.environment = environment
    }

    /// Programs the docs' commands run that a machine may lack: a word of a command that
    /// names one of them, and how to see it is there.
    static let programs: [String: String] = {
        var checks: [String: String] = [:]
        for program in ["git", "podman", "docker", "keyring", "borg", "restic", "rclone", "gocryptfs", "direnv", "age",
                        "age-keygen", "getfattr", "setfattr", "secret-tool", "dbus-run-session", "keyctl", "fusermount3",
                        "python3", "od", "runuser", "pgrep"] {
            checks[program] = "command -v \(program)"
        }
        checks["dotenv"] = "python3 -c 'import dotenv'"
        return checks
    }()

    public func run(_ blocks: [ExampleBlock]) -> [ExampleOutcome] {
        var outcomes: [ExampleOutcome] = []
        var chainBroken = true
        for block in blocks {
            var outcome = ExampleOutcome(block: block.name)
            defer { outcomes.append(outcome) }
            if let reason = block.notRunReason {
                outcome.skipped = "marked not run: \(reason)"
                continue
            }
            if block.continues, chainBroken {
                outcome.skipped = "it continues a block that did not run here"
                continue
            }
            if let missing = missingRequirement(block) {
                outcome.skipped = missing
                if !block.continues { sandbox?.tearDown(); sandbox = nil }
                chainBroken = true
                continue
            }
            do {
                if !block.continues {
                    sandbox?.tearDown()
                    sandbox = try ExampleSandbox(environment: environment, first: block)
                }
                guard let sandbox else { continue }
                if block.asRoot {
                    let held = Set(words(of: block)).intersection(sandbox.rootServicesAtStart)
                    if !held.isEmpty {
                        outcome.skipped = "root's keyrings already hold \(held.sorted().joined(separator: ", ")), which it would change"
                        chainBroken = true
                        continue
                    }
                }
                chainBroken = false
                outcome.failures = try run(block, in: sandbox)
                if outcome.failures.contains(where: { $0.contains("did not finish") }) {
                    sandbox.tearDown()
                    self.sandbox = nil
                    chainBroken = true
                }
            } catch {
                outcome.failures.append("\(block.name): the sandbox failed: \(error)")
                chainBroken = true
            }
        }
        sandbox?.tearDown()
        sandbox = nil
        return outcomes
    }

    private func run(_ block: ExampleBlock, in sandbox: ExampleSandbox) throws -> [String] {
        var failures: [String] = []
        var names: [String: String] = [:]
        for user in block.namedUsers { names[user] = ExampleEnvironment.account(for: user) }
        for group in block.groups.keys { names[group] = ExampleEnvironment.account(for: group) }
        // Accounts in exactly the groups the block names, before their shells start.
        if !block.asRoot, let main = sandbox.account(for: nil) {
            _ = ExampleAccounts.ensure(main)
            var groups: [String] = []
            for (group, members) in block.groups where members.contains("you") {
                let name = ExampleEnvironment.account(for: group)
                guard ExampleAccounts.ensureGroup(name) else { return ["\(block.name): cannot make the group \(name)"] }
                groups.append(name)
            }
            guard ExampleAccounts.setGroups(main, groups) else { return ["\(block.name): cannot set the groups of \(main)"] }
        }
        for user in block.namedUsers {
            let account = ExampleEnvironment.account(for: user)
            guard ExampleAccounts.ensure(account) != nil else { return ["\(block.name): cannot make the account \(account)"] }
            var groups: [String] = []
            for (group, members) in block.groups where members.contains(user) {
                let name = ExampleEnvironment.account(for: group)
                guard ExampleAccounts.ensureGroup(name) else { return ["\(block.name): cannot make the group \(name)"] }
                groups.append(name)
            }
            guard ExampleAccounts.setGroups(account, groups) else { return ["\(block.name): cannot set the groups of \(account)"] }
        }
        for file in block.files { try sandbox.write(file) }
        for step in block.setup {
            let result = try sandbox.shell(for: step.user).run(Self.mapped(step.command, names))
            guard result.status == 0 else {
                let status = result.status.map { "exit \($0)" } ?? "did not finish"
                return ["\(block.file):\(step.line): the setup command `\(step.command)` failed (\(status)):\n\(Self.indented(result.output))"]
            }
        }
        for step in block.steps {
            let result = try sandbox.shell(for: step.user).run(Self.mapped(step.command, names))
            let printed = ExampleOutput.visible(Self.unmapped(result.output, names))
            guard result.status != nil else {
                failures.append("\(block.file):\(step.line): `\(step.command)` did not finish; it printed:\n\(Self.indented(printed))")
                break
            }
            let actual = ExampleOutput.lines(printed)
            if !ExampleOutput.matches(expected: step.expected, actual: actual) {
                failures.append("""
                    \(block.file):\(step.line): `\(step.command)` printed:
                    \(Self.indented(printed))
                    where the docs show:
                    \(Self.indented(step.expected.joined(separator: "\n")))
                    """)
            }
        }
        return failures
    }

    /// Why the block cannot run on this machine, or nil.
    func missingRequirement(_ block: ExampleBlock) -> String? {
        let words = Set(words(of: block))
        var missing: [String] = []
        for word in words.sorted() {
            guard let check = Self.programs[word] else { continue }
            if requirementCache[word] == nil {
                requirementCache[word] = (try? runCommand("/bin/sh", ["-c", check + " >/dev/null 2>&1"],
                                                          environment: ["PATH": "/usr/sbin:/usr/bin:/sbin:/bin"]))?.status == 0
            }
            if requirementCache[word] == false { missing.append(word) }
        }
        if !missing.isEmpty { return "not installed here: \(missing.joined(separator: ", "))" }
        if words.contains("keyring"), environment.python == nil {
            return "the python keyring backend is not installed: \(environment.pythonProblem ?? "")"
        }
        if words.contains("mount") {
            let fd = open("/dev/fuse", O_RDWR)
            if fd < 0 { return "/dev/fuse cannot be opened here: \(String(cString: strerror(errno)))" }
            close(fd)
            if requirementCache["fusermount3"] == nil {
                requirementCache["fusermount3"] = programExists("fusermount3")
            }
            if requirementCache["fusermount3"] == false { return "fusermount3 is not installed (package fuse3)" }
        }
        return nil
    }

    /// The words of a block's commands, split at white space, quotes and the shell's
    /// operators (so `docker:host` is one word, and `python3 -c 'import dotenv'` has `dotenv`).
    func words(of block: ExampleBlock) -> [String] {
        (block.steps + block.setup).flatMap { step in
            step.command.split { $0.isWhitespace || "'\"|;&()<>$={}`".contains($0) }.map(String.init)
        }
    }

    /// The docs' user and group names in a command, as the sandbox's accounts: whole words
    /// only (`alice`, `~/kc/shared/alice/x`, not `com.example.alice`).
    static func mapped(_ text: String, _ names: [String: String]) -> String {
        var result = text
        for (name, account) in names.sorted(by: { $0.key.count > $1.key.count }) {
            var output = ""
            var rest = Substring(result)
            while let range = rest.range(of: name) {
                let before = range.lowerBound == rest.startIndex ? output.last : rest[rest.index(before: range.lowerBound)]
                let after = range.upperBound == rest.endIndex ? nil : rest[range.upperBound]
                let boundary: (Character?) -> Bool = { $0 == nil || $0!.isWhitespace || "/'\"=".contains($0!) }
                output += rest[..<range.lowerBound]
                output += boundary(before) && boundary(after) ? account : name
                rest = rest[range.upperBound...]
            }
            result = output + rest
        }
        return result
    }

    /// The sandbox's account names in output, as the docs' names.
    static func unmapped(_ text: String, _ names: [String: String]) -> String {
        var result = text
        for (name, account) in names.sorted(by: { $0.value.count > $1.value.count }) {
            result = result.replacingOccurrences(of: account, with: name)
        }
        return result
    }

    static func indented(_ text: String) -> String {
        ExampleOutput.lines(text).map { "    " + $0.replacingOccurrences(of: "\t", with: "\\t") }.joined(separator: "\n")
    }
}
