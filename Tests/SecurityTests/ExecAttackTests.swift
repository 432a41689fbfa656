import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// `kc exec` under attack: links planted where it sweeps its directories, items named
/// after variables that run code, and a look into its memory while the command runs.
final class ExecAttackTests: KeyringTestCase {

    // MARK: --files never follows a link

    func testFilesNeverFollowALinkAnotherUserPlantedAsAStaleDirectory() throws {
        try requireRootAndSharedMemory()
        try withProtectedSymlinks(off: true) {
            let victim = try makeVictimDirectory()
            defer { try? FileManager.default.removeItem(atPath: victim) }
            let link = "/dev/shm/kc-exec.\(deadPID()).2"
            let planted = try LocalUser.carol.run("ln -s \(victim) \(link)", freshSession: false)
            XCTAssertEqual(planted.status, 0, "\(planted)")
            defer { unlink(link) }

            let result = try kcWithoutRuntimeDirectory("exec", "--service", serviceWithToken(), "--files", "--", "/bin/true")

            XCTAssertEqual(result.status, 0, "\(result)")
            XCTAssertEqual(result.standardError, "")
            assertVictimIntact(victim)
            XCTAssertEqual(fileType(link), S_IFLNK, "carol's link is not kc's to remove")
        }
    }

    func testFilesSweepOnlyDirectoriesWithTheModeKcGivesThem() throws {
        try requireRootAndSharedMemory()
        let foreign = "/dev/shm/kc-exec.\(deadPID()).3"
        XCTAssertEqual(mkdir(foreign, 0o755), 0)
        defer { _ = try? FileManager.default.removeItem(atPath: foreign) }
        chmod(foreign, 0o755)
        try Data("keep\n".utf8).write(to: URL(fileURLWithPath: foreign + "/notes"))

        let result = try kcWithoutRuntimeDirectory("exec", "--service", serviceWithToken(), "--files", "--", "/bin/true")

        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try String(contentsOfFile: foreign + "/notes", encoding: .utf8), "keep\n",
                       "a directory of mode 0755 is not one kc made")
    }

    func testFilesNeverZeroAFileLinkedIntoAStaleDirectoryFromElsewhere() throws {
        try requireRootAndSharedMemory()
        let victim = "/dev/shm/kc-victim-\(getpid())"
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: victim))
        defer { unlink(victim) }
        let stale = "/dev/shm/kc-exec.\(deadPID()).4"
        XCTAssertEqual(mkdir(stale, 0o700), 0)
        defer { _ = try? FileManager.default.removeItem(atPath: stale) }
        XCTAssertEqual(link(victim, stale + "/token"), 0)
        chmod(stale, 0o500)

        let result = try kcWithoutRuntimeDirectory("exec", "--service", serviceWithToken(), "--files", "--", "/bin/true")

        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try String(contentsOfFile: victim, encoding: .utf8), "precious\n",
                       "a file with another name elsewhere is not one kc wrote")
    }

    // MARK: --env never hands an item a variable that runs code

    func testEnvRefusesItemsThatWouldBecomeLoaderShellOrLookupVariables() throws {
        let marker = NSTemporaryDirectory() + "kc-exec-ran-\(getpid())"
        defer { unlink(marker) }
        for (item, variable) in [("ld.preload", "LD_PRELOAD"), ("bash_env", "BASH_ENV"), ("path", "PATH"),
                                 ("home", "HOME"), ("pythonpath", "PYTHONPATH"), ("node_options", "NODE_OPTIONS"),
                                 ("glibc.tunables", "GLIBC_TUNABLES"), ("git_ssh_command", "GIT_SSH_COMMAND"),
                                 ("openssl_conf", "OPENSSL_CONF"), ("lessopen", "LESSOPEN"), ("ssh_auth_sock", "SSH_AUTH_SOCK"),
                                 ("credentials_directory", "CREDENTIALS_DIRECTORY")] {
            let service = uniqueService()
            try Keychain(service: service).set("/tmp/evil", forKey: item)

            let result = try kc("exec", "--service", service, "--env", "--", "/bin/sh", "-c", "touch \(marker)")

            XCTAssertEqual(result.status, 2, "\(item): \(result)")
            XCTAssertEqual(result.standardError, """
                kc: item '\(item)' of '\(service)' would become $\(variable), which changes what programs load, run or trust; \
                rename the item, use --files, or pass --allow-env \(variable) if you mean it

                """)
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "\(item): nothing runs")
        }
    }

    func testAllowEnvPassesTheNamedVariableFromYourOwnServiceAndNoOther() throws {
        let service = uniqueService()
        try Keychain(service: service).set("/opt/tool/bin:/usr/bin:/bin", forKey: "path")

        let allowed = try kc("exec", "--service", service, "--env", "--allow-env", "PATH", "--",
                             "/bin/sh", "-c", "printf %s \"$PATH\"")
        XCTAssertEqual(allowed.status, 0, "\(allowed)")
        XCTAssertEqual(allowed.output, "/opt/tool/bin:/usr/bin:/bin")

        try Keychain(service: service).set("/tmp/evil", forKey: "home")
        let other = try kc("exec", "--service", service, "--env", "--allow-env", "PATH", "--", "/bin/true")
        XCTAssertEqual(other.status, 2, "\(other)")
        XCTAssertTrue(other.standardError.hasPrefix("kc: item 'home' of '\(service)' would become $HOME,"), other.standardError)
    }

    func testAllowEnvIsRefusedForAServiceAnotherUserShares() throws {
        for option in [["--group", LocalUser.group], ["--from", LocalUser.alice.rawValue]] {
            let result = try kc(["exec"] + option + ["--service", "com.example", "--var", "PATH=path", "--allow-env", "PATH", "--", "/bin/true"])
            XCTAssertEqual(result.status, 64, "\(option): \(result)")
            XCTAssertEqual(result.standardError, """
                kc: --allow-env is only for your own services: a service another user shares with you may not \
                set $PATH; drop --allow-env, or use --files; see 'kc help exec'

                """)
        }
    }

    /// Round three, finding 1: an item `openssl_conf` made OpenSSL load the sharer's
    /// provider into the member's `curl`, and `lessopen` ran a command when `less` opened
    /// a file; a deny list cannot name every such variable. A service another user shares
    /// sets only the variables the member names.
    func testAServiceAnotherUserSharesSetsOnlyTheVariablesTheMemberNames() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to run as the throwaway users")
        defer { LocalUser.alice.clearKeyrings(); LocalUser.bob.clearKeyrings() }
        let service = "kc-sec-exec.\(getpid()).allow"
        let marker = "/tmp/kc-sec-exec-ran-\(getpid())"
        defer { unlink(marker) }
        let stored = try LocalUser.alice.run("""
            set -e
            printf t0k | "$KC" set --group \(LocalUser.group) --access after-first-unlock \(service) token
            printf /tmp/evil.cnf | "$KC" set --group \(LocalUser.group) --access after-first-unlock \(service) openssl_conf
            printf '|touch \(marker) %s' | "$KC" set --group \(LocalUser.group) --access after-first-unlock \(service) lessopen
            """)
        XCTAssertEqual(stored.status, 0, "\(stored)")

        for reader in [["--group", LocalUser.group], ["--from", LocalUser.alice.rawValue]] {
            let every = try LocalUser.bob.run("\"$KC\" exec \(reader.joined(separator: " ")) --service \(service) --env -- /bin/sh -c 'touch \(marker)'")
            XCTAssertEqual(every.status, 64, "\(reader): \(every)")
            XCTAssertEqual(kcLines(every), ["kc: a service another user shares sets only the variables you name: replace --env with --var NAME (or --var NAME=ITEM) for each, or use --files; see 'kc help exec'"])
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "\(reader): nothing runs")

            let named = try LocalUser.bob.run("""
                "$KC" exec \(reader.joined(separator: " ")) --service \(service) --var TOKEN --var DEPLOY_TOKEN=token -- \
                    /bin/sh -c 'printf "%s %s %s %s" "$TOKEN" "$DEPLOY_TOKEN" "${OPENSSL_CONF-unset}" "${LESSOPEN-unset}"'
                """)
            XCTAssertEqual(named.status, 0, "\(reader): \(named)")
            XCTAssertEqual(named.output, "t0k t0k unset unset", "\(reader): only the variables bob named")

            let dangerous = try LocalUser.bob.run("\"$KC\" exec \(reader.joined(separator: " ")) --service \(service) --var LESSOPEN -- /bin/sh -c 'touch \(marker)'")
            XCTAssertEqual(dangerous.status, 2, "\(reader): \(dangerous)")
            XCTAssertEqual(kcLines(dangerous), ["kc: $LESSOPEN changes what programs load, run or trust, and a value another user shares or may write may not set it; choose another name for --var, or use --files"])
            XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "\(reader): nothing runs")
        }
    }

    func testAGroupMemberCannotPreloadALibraryIntoYourCommand() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to run as the throwaway users")
        defer { LocalUser.alice.clearKeyrings(); LocalUser.bob.clearKeyrings() }
        let service = "kc-sec-exec.\(getpid()).preload"
        let stored = try LocalUser.alice.run(
            "printf /tmp/evil.so | \"$KC\" set --group \(LocalUser.group) --access after-first-unlock \(service) ld.preload")
        XCTAssertEqual(stored.status, 0, "\(stored)")

        for variable in ["LD_PRELOAD", "LD_PRELOAD=ld.preload", "ld_preload=ld.preload"] {
            let victim = try LocalUser.bob.run(
                "\"$KC\" exec --group \(LocalUser.group) --service \(service) --var \(variable) -- /bin/sh -c 'echo ran'")

            XCTAssertEqual(victim.status, 2, "\(victim)")
            XCTAssertEqual(victim.output, "", "nothing runs")
            let name = variable.prefix { $0 != "=" }
            XCTAssertEqual(kcLines(victim), ["kc: $\(name) changes what programs load, run or trust, and a value another user shares or may write may not set it; choose another name for --var, or use --files"])
        }
    }

    /// Found attacking round three's fixes: alice's own group-writable share holds
    /// `tar_options`; bob, a member, wrote `--checkpoint=1 --checkpoint-action=exec=...`
    /// into it, and alice's `kc exec --env -- tar` ran bob's command as alice. A service
    /// members may write sets only the variables its owner names, and never a dangerous one.
    func testAMemberOfYourWritableShareCannotChooseYourCommandsVariables() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to run as the throwaway users")
        defer { LocalUser.alice.clearKeyrings(); LocalUser.bob.clearKeyrings() }
        let service = "kc-sec-exec.\(getpid()).writable"
        let marker = "/tmp/kc-sec-exec-tar-\(getpid())"
        defer { unlink(marker) }
        let stored = try LocalUser.alice.run("""
            set -e
            printf -- '--warning=no-timestamp --with-room-for-a-member' | "$KC" set --access after-first-unlock \(service) tar_options
            printf t0k | "$KC" set --access after-first-unlock \(service) token
            "$KC" share \(service) --group \(LocalUser.group) --group-writable
            """)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let written = try LocalUser.bob.run("printf -- '--checkpoint=1 --checkpoint-action=exec=touch' | \"$KC\" set --from \(LocalUser.alice.rawValue) \(service) tar_options; echo \"rc=$?\"")
        XCTAssertEqual(written.output, "rc=0\n", "\(written)")

        let every = try LocalUser.alice.run("\"$KC\" exec --service \(service) --env -- /bin/sh -c 'touch \(marker)'")
        XCTAssertEqual(every.status, 2, "\(every)")
        XCTAssertEqual(kcLines(every), ["kc: members of group '\(LocalUser.group)' may write the values of '\(service)', so --env would let them choose what your command runs with: replace --env with --var NAME (or --var NAME=ITEM) for each, or use --files"])
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "nothing runs")

        let allowed = try LocalUser.alice.run("\"$KC\" exec --service \(service) --var TAR_OPTIONS --allow-env TAR_OPTIONS -- /bin/sh -c 'touch \(marker)'")
        XCTAssertEqual(allowed.status, 2, "\(allowed)")
        XCTAssertFalse(FileManager.default.fileExists(atPath: marker), "nothing runs")

        let named = try LocalUser.alice.run("\"$KC\" exec --service \(service) --var TOKEN -- /bin/sh -c 'printf \"%s %s\" \"$TOKEN\" \"${TAR_OPTIONS-unset}\"'")
        XCTAssertEqual(named.output, "t0k unset", "\(named)")
    }

    /// kc's lines, without keyctl's own about the fresh session.
    private func kcLines(_ result: CommandResult) -> [Substring] {
        result.standardError.split(separator: "\n").filter { !$0.hasPrefix("Joined session keyring") }
    }

    // MARK: kc holds no copy of a value while the command runs

    func testKcHoldsNoCopyOfAValueWhileTheCommandRuns() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to read another process's memory")
        defer { LocalUser.dave.clearKeyrings() }
        let secret = "kc-sec-value-" + (0..<4).map { _ in String(UInt64.random(in: .min ... .max), radix: 16) }.joined()
        let running = try startSleepingExec(as: .dave, storing: secret)
        defer { running.finish() }

        let copies = try countOccurrences(of: Array(secret.utf8), inWritableMemoryOf: running.kc)

        XCTAssertEqual(copies, 0, "copies of the value in kc's memory while its command runs")
        XCTAssertEqual(running.finish(), 0)
    }

    func testKcExecCannotBeDumpedOrTracedByItsOwnUser() throws {
        try XCTSkipUnless(LocalUser.available, "needs root to see another user's process")
        defer { LocalUser.dave.clearKeyrings() }
        let running = try startSleepingExec(as: .dave, storing: "v")
        defer { running.finish() }

        var info = stat()
        XCTAssertEqual(stat("/proc/\(running.kc)/mem", &info), 0)
        XCTAssertEqual(info.st_uid, 0, "a process that is not dumpable has its /proc files owned by root")
        XCTAssertEqual(coreLimit(of: running.kc), "0", "and its core-file limit is 0")
        let traced = try LocalUser.dave.run("cat /proc/\(running.kc)/environ >/dev/null 2>&1; echo $?", freshSession: false)
        XCTAssertEqual(traced.output, "1\n", "dave cannot read his own kc's environment")
    }

    func testTheCommandKeepsTheCoreLimitItsCallerSet() throws {
        let service = try serviceWithToken()
        let result = try runShell("""
            ulimit -S -c 2048
            grep 'core file' /proc/self/limits
            '\(builtKC)' exec --service \(service) --env -- grep 'core file' /proc/self/limits
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, result.output)
        XCTAssertEqual(lines.first, lines.last, "kc's own limit of 0 is not passed on")
    }

    // MARK: Helpers

    private func requireRootAndSharedMemory() throws {
        try XCTSkipUnless(LocalUser.available, "needs root and the throwaway users")
        var info = stat()
        try XCTSkipUnless(stat("/dev/shm", &info) == 0 && info.st_mode & S_ISVTX != 0, "needs a sticky /dev/shm")
    }

    private func serviceWithToken() throws -> String {
        let service = uniqueService()
        try Keychain(service: service).set("t", forKey: "token")
        return service
    }

    /// kc run the way setpriv, cron and su run it: no $XDG_RUNTIME_DIR, so /dev/shm.
    private func kcWithoutRuntimeDirectory(_ arguments: String...) throws -> CommandResult {
        var environment = ProcessInfo.processInfo.environment
        environment["XDG_RUNTIME_DIR"] = nil
        return try runCommand(builtKC, arguments, environment: environment)
    }

    /// Runs `body` with fs.protected_symlinks set as the kernel's default leaves it, and
    /// puts the setting back.
    private func withProtectedSymlinks(off: Bool, _ body: () throws -> Void) throws {
        let setting = "/proc/sys/fs/protected_symlinks"
        let saved = try String(contentsOfFile: setting, encoding: .utf8)
        try Data((off ? "0\n" : "1\n").utf8).write(to: URL(fileURLWithPath: setting))
        defer { try? Data(saved.utf8).write(to: URL(fileURLWithPath: setting)) }
        try body()
    }

    private func makeVictimDirectory() throws -> String {
        let victim = "/tmp/kc-victim-\(getpid())"
        try? FileManager.default.removeItem(atPath: victim)
        XCTAssertEqual(mkdir(victim, 0o755), 0)
        chmod(victim, 0o755)
        try Data("precious\n".utf8).write(to: URL(fileURLWithPath: victim + "/a"))
        return victim
    }

    private func assertVictimIntact(_ victim: String, file: StaticString = #filePath, line: UInt = #line) {
        var info = stat()
        XCTAssertEqual(stat(victim, &info), 0, file: file, line: line)
        XCTAssertEqual(info.st_mode & 0o7777, 0o755, "the victim's mode", file: file, line: line)
        XCTAssertEqual(try? String(contentsOfFile: victim + "/a", encoding: .utf8), "precious\n", file: file, line: line)
    }

    private func fileType(_ path: String) -> mode_t {
        var info = stat()
        return lstat(path, &info) == 0 ? info.st_mode & S_IFMT : 0
    }

    /// A pid no process has, for a directory name whose owner is gone.
    private func deadPID() -> pid_t {
        var pid: pid_t = 999_998
        while kill(pid, 0) == 0 || errno != ESRCH { pid -= 1 }
        return pid
    }

    private func coreLimit(of pid: pid_t) -> String? {
        guard let limits = try? String(contentsOfFile: "/proc/\(pid)/limits", encoding: .utf8) else { return nil }
        let line = limits.split(separator: "\n").first { $0.hasPrefix("Max core file size") }
        return line?.split(separator: " ", omittingEmptySubsequences: true).dropFirst(4).first.map(String.init)
    }

    /// `kc exec --env --files -- sleep 5` started by `user`, once its command sleeps.
    private func startSleepingExec(as user: LocalUser, storing value: String) throws -> SleepingExec {
        let pidFile = "/tmp/kc-sec-exec-pid-\(getpid())-\(UInt32.random(in: 0 ... .max))"
        let service = "kc-sec-exec.\(getpid()).memory"
        let script = """
            KC=\(UnprivilegedUser.kcCopy); export KC; cd /tmp
            "$KC" set \(service) token || exit 90
            "$KC" exec --service \(service) --env --files -- sleep 5 < /dev/null &
            echo $! > \(pidFile).tmp && mv \(pidFile).tmp \(pidFile)
            wait $!
            """
        let process = Process()
        process.executableURL = URL(fileURLWithPath: "/usr/sbin/runuser")
        process.arguments = ["-u", user.rawValue, "--", "keyctl", "session", "-", "/bin/sh", "-c", script]
        let input = Pipe()
        process.standardInput = input
        process.standardOutput = FileHandle.nullDevice
        try process.run()
        try input.fileHandleForWriting.write(contentsOf: Data(value.utf8))
        try input.fileHandleForWriting.close()
        defer { unlink(pidFile) }
        for _ in 0..<500 where !FileManager.default.fileExists(atPath: pidFile) { usleep(10_000) }
        let kcPID = try pid_t(String(contentsOfFile: pidFile, encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)) ?? 0
        // Wait until kc's child has become `sleep`: kc is then waiting for it.
        for _ in 0..<500 {
            let children = (try? String(contentsOfFile: "/proc/\(kcPID)/task/\(kcPID)/children", encoding: .utf8)) ?? ""
            if let child = children.split(separator: " ").first,
               (try? String(contentsOfFile: "/proc/\(child)/comm", encoding: .utf8)) == "sleep\n" { break }
            usleep(10_000)
        }
        return SleepingExec(process: process, kc: kcPID)
    }
}

/// A `kc exec` whose command is asleep.
private final class SleepingExec {
    let process: Process
    let kc: pid_t
    private var status: Int32?

    init(process: Process, kc: pid_t) {
        self.process = process
        self.kc = kc
    }

    /// Waits for it to end; its status.
    @discardableResult
    func finish() -> Int32 {
        if let status { return status }
        process.waitUntilExit()
        status = process.terminationStatus
        return process.terminationStatus
    }
}

/// How often `needle` occurs in the writable mappings of process `pid` (its heap, its
/// stacks, its data), read through /proc/PID/mem as root.
private func countOccurrences(of needle: [UInt8], inWritableMemoryOf pid: pid_t) throws -> Int {
    let maps = try String(contentsOfFile: "/proc/\(pid)/maps", encoding: .utf8)
    let memory = open("/proc/\(pid)/mem", O_RDONLY | O_CLOEXEC)
    guard memory >= 0 else { throw POSIXError(POSIXErrorCode(rawValue: errno) ?? .EIO) }
    defer { close(memory) }
    var count = 0
    for line in maps.split(separator: "\n") {
        let fields = line.split(separator: " ", omittingEmptySubsequences: true)
        guard fields.count >= 2, fields[1].hasPrefix("rw") else { continue }
        let bounds = fields[0].split(separator: "-").compactMap { UInt64($0, radix: 16) }
        guard bounds.count == 2 else { continue }
        var region = [UInt8](repeating: 0, count: Int(bounds[1] - bounds[0]))
        let read = region.withUnsafeMutableBytes { pread(memory, $0.baseAddress, $0.count, off_t(Int64(bitPattern: bounds[0]))) }
        guard read > needle.count else { continue }  // [vvar] and the like cannot be read
        var index = 0
        while index + needle.count <= read {
            if region[index] == needle[0], region[index..<(index + needle.count)].elementsEqual(needle) { count += 1 }
            index += 1
        }
    }
    return count
}
