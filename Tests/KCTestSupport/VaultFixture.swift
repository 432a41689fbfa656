import Foundation
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// A vault of one test's own: `XDG_DATA_HOME` is a fresh folder
/// `/tmp/kc-test-vault-PID-N` (mode 0700), so the vault is `…/kc`. Only the commands
/// run through the fixture see it; the test process itself runs with no vault (see
/// ``VaultTestCase``), so its own library calls never write a vault file.
public final class VaultFixture {
    nonisolated(unsafe) private static var counter = 0

    /// What the tests seal their vaults with.
    public static let passphrase = "kc test passphrase"

    /// The scrypt work factor the tests use: the smallest kc accepts, so an unlock
    /// takes milliseconds.
    public static let workFactor = 10

    /// The folder given as `XDG_DATA_HOME`, or as `HOME` (``inHome``).
    public let dataHome: String
    /// Whose folder it is: nil for the caller, else a test account's name.
    public let owner: String?
    /// Whether the folder is a home, where kc finds the vault without `XDG_DATA_HOME`
    /// (as PAM and the boot step do): at `.local/share/kc`.
    public let inHome: Bool
    /// The environment commands run with: this process's, with `XDG_DATA_HOME` (or `HOME`) set.
    public private(set) var environment: [String: String]

    /// The vault folder: `$XDG_DATA_HOME/kc`, or `$HOME/.local/share/kc`.
    public var path: String { dataHome + (inHome ? "/.local/share/kc" : "/kc") }

    /// Makes the folder (empty: no vault yet; ``create(passphrase:workFactor:)`` makes it).
    public init(owner: String? = nil, inHome: Bool = false) throws {
        Self.counter += 1
        dataHome = "/tmp/kc-test-vault-\(getpid())-\(Self.counter)"
        self.owner = owner
        self.inHome = inHome
        if FileOps.exists(dataHome) { _ = try runCommand("/bin/rm", ["-rf", dataHome]) }
        guard Glibc.mkdir(dataHome, 0o700) == 0 else {
            throw NSError(domain: NSPOSIXErrorDomain, code: Int(errno), userInfo: [NSLocalizedDescriptionKey: "mkdir \(dataHome)"])
        }
        if let owner { _ = try runCommand("/bin/chown", [owner + ":", dataHome]) }
        var environment = ProcessInfo.processInfo.environment
        if inHome {
            environment["XDG_DATA_HOME"] = nil
            environment["HOME"] = dataHome
        } else {
            environment["XDG_DATA_HOME"] = dataHome
        }
        environment["KC_HOST_KEY_DIR"] = nil
        self.environment = environment
    }

    /// Sets (or with nil removes) a variable for the commands run from now on.
    public func setEnvironment(_ name: String, _ value: String?) {
        environment[name] = value
    }

    // MARK: Running kc with this vault

    /// Runs the built `kc` with this vault.
    @discardableResult
    public func kc(_ arguments: String..., input: [UInt8] = []) throws -> CommandResult {
        try runCommand(builtKC, arguments, input: input, environment: environment)
    }

    @discardableResult
    public func kc(_ arguments: [String], input: [UInt8] = []) throws -> CommandResult {
        try runCommand(builtKC, arguments, input: input, environment: environment)
    }

    /// Runs a bash script with this vault, in which `kc` is the built kc, `$VAULT` the
    /// vault folder and `$PASSPHRASE` the tests' passphrase. Bash, so names can be
    /// given as `$'a\xffb'` bytes.
    @discardableResult
    public func bash(_ script: String, input: [UInt8] = []) throws -> CommandResult {
        let prelude = "kc() { '\(builtKC)' \"$@\"; }\nVAULT='\(path)'\nPASSPHRASE='\(Self.passphrase)'\n"
        return try runCommand("/bin/bash", ["-c", prelude + script], input: input, environment: environment)
    }

    /// `kc set [options] SERVICE NAME` of `value`, the names passed as exact bytes.
    @discardableResult
    public func set(_ service: some KeyNameConvertible, _ name: some KeyNameConvertible, _ value: [UInt8],
                    options: [String] = []) throws -> CommandResult {
        try bash(namesScript(service, name) + "kc set \(options.joined(separator: " ")) \"$service\" \"$name\"", input: value)
    }

    @discardableResult
    public func set(_ service: some KeyNameConvertible, _ name: some KeyNameConvertible, _ value: String,
                    options: [String] = []) throws -> CommandResult {
        try set(service, name, Array(value.utf8), options: options)
    }

    /// `kc get SERVICE NAME`, the names passed as exact bytes.
    public func get(_ service: some KeyNameConvertible, _ name: some KeyNameConvertible) throws -> CommandResult {
        try bash(namesScript(service, name) + "kc get \"$service\" \"$name\"")
    }

    /// `kc rm SERVICE NAME`.
    @discardableResult
    public func remove(_ service: some KeyNameConvertible, _ name: some KeyNameConvertible) throws -> CommandResult {
        try bash(namesScript(service, name) + "kc rm \"$service\" \"$name\"")
    }

    private func namesScript(_ service: some KeyNameConvertible, _ name: some KeyNameConvertible) -> String {
        "printf -v service '\(bashEscaped(service.keyName.bytes))'; printf -v name '\(bashEscaped(name.keyName.bytes))'\n"
    }

    /// `kc vault init --work-factor 10` with the passphrase on standard input; fails the
    /// test if it does not succeed.
    @discardableResult
    public func create(passphrase: String = VaultFixture.passphrase, workFactor: Int = VaultFixture.workFactor,
                       file: StaticString = #filePath, line: UInt = #line) throws -> CommandResult {
        let result = try kc(["vault", "init", "--work-factor", String(workFactor)], input: Array((passphrase + "\n").utf8))
        XCTAssertEqual(result.status, 0, "kc vault init: \(result)", file: file, line: line)
        return result
    }

    /// `kc unlock --json` with the passphrase on standard input: the command's result
    /// and its report (nil if it printed none, as on a wrong passphrase).
    public func unlock(passphrase: String = VaultFixture.passphrase) throws -> (result: CommandResult, report: UnlockReport?) {
        let result = try kc(["unlock", "--json"], input: Array((passphrase + "\n").utf8))
        let report = try? JSONDecoder().decode(UnlockReport.self, from: Data(result.standardOutput))
        return (result, report)
    }

    /// `kc vault status --json`.
    public func status() throws -> Status {
        let result = try kc("vault", "status", "--json")
        return try JSONDecoder().decode(Status.self, from: Data(result.standardOutput))
    }

    /// `kc lock`, dropping the given levels too.
    @discardableResult
    public func lock(levels: [String] = []) throws -> CommandResult {
        try kc(["lock"] + levels.flatMap { ["--level", $0] })
    }

    // MARK: Files

    /// The file of an item: `items/LEVEL/SERVICE/ITEM` (LEVEL as `kc vault status` names it,
    /// e.g. `after-first-unlock+this-device-only`).
    public func itemFile(_ level: String, _ service: String, _ item: String) -> String {
        "\(path)/items/\(level)/\(service)/\(item)"
    }

    /// The item files there are, as paths relative to `items/` (UTF-8 names only).
    public func itemFiles() -> [String] {
        let items = path + "/items"
        guard let walker = FileManager.default.enumerator(atPath: items) else { return [] }
        var files: [String] = []
        while let relative = walker.nextObject() as? String {
            var isFolder: ObjCBool = false
            if FileManager.default.fileExists(atPath: items + "/" + relative, isDirectory: &isFolder), !isFolder.boolValue {
                files.append(relative)
            }
        }
        return files.sorted()
    }

    /// The entries of the vault's `tmp/` folder (files a writer staged).
    public func stagedFiles() -> [String] {
        (try? FileManager.default.contentsOfDirectory(atPath: path + "/tmp")) ?? []
    }

    /// The SHA-256 of every file of the vault with its path (names as bytes), except
    /// `lock` (created empty by any writer) and `status` (the last unlock's outcome,
    /// which an unlock records even when it fails): what a refused or failed command
    /// must leave exactly as it was.
    public func digest() throws -> String {
        let result = try runShell("cd '\(path)' && find . -type f ! -path ./lock ! -path ./status -print0 | LC_ALL=C sort -z | xargs -0r sha256sum")
        return result.output + result.standardError
    }

    /// The SHA-256 of each item file, by path relative to `items/`.
    public func itemDigest() throws -> String {
        let result = try runShell("cd '\(path)/items' && find . -type f -print0 | LC_ALL=C sort -z | xargs -0r sha256sum")
        return result.output + result.standardError
    }

    // MARK: Locking and removal

    /// Whether the vault's key is stashed in this uid's user keyring (it is unlocked).
    public var isStashed: Bool {
        stashKey != nil
    }

    private var stashKey: KeySerial? {
        try? SpecialKeyring.user.serial.search(type: "user", description: KeyName("kc.vault:" + path))
    }

    /// Forgets the vault's key as a reboot would (the user keyring is emptied then).
    public func dropStash() {
        for _ in 0..<3 {
            guard let key = stashKey else { return }
            // Unlinked first, as kc does: a pruned link of an invalidated key stays
            // charged to the user keyring's owner (kc's OwnService.drop).
            _ = try? key.unlink(from: SpecialKeyring.user.serial)
            _ = try? key.invalidate()
        }
    }

    /// Locks the vault dropping its items at every level from the kernel, and removes
    /// the folder. For a vault of the caller's only (a test account's is dropped with
    /// its keyrings, see ``VaultAccount``).
    public func destroy() {
        if owner == nil {
            if FileOps.exists(path + "/recipient") { _ = try? lock(levels: ["after-first-unlock", "always"]) }
            dropStash()  // also when the folder went first (an unmounted tmpfs)
            // The session's record of its last load of this vault (kc's LoginSession):
            // the test process's session keyring outlives every vault it made.
            if let loaded = try? SpecialKeyring.session.serial.search(type: "user", description: KeyName(bytes: Array(("kc.loaded:" + path).utf8))) {
                _ = try? loaded.unlink(from: SpecialKeyring.session.serial)
            }
        }
        if isMounted(dataHome) { _ = try? runCommand("/bin/umount", ["-l", dataHome]) }
        _ = try? runCommand("/bin/rm", ["-rf", dataHome])
    }

    // MARK: JSON

    /// `kc unlock --json`.
    public struct UnlockReport: Decodable, Sendable {
        public var loaded: [String: Int]
        public var alreadyLoaded: Int
        public var updatedFromKernel: Int
        public var updatedFromVault: Int?
        public var expiredRemoved: Int
        public var waiting: Int
        public var unreadable: [[String: String]]
        public var failed: [[String: String]]
        /// Items loaded whose newer kernel value could not be saved to their file.
        public var notSavedAgain: [[String: String]]?
        public var notLoadedForQuota: [String]

        /// Items loaded at all levels.
        public var loadedCount: Int { loaded.values.reduce(0, +) }
        /// The paths of the files reported unreadable.
        public var unreadableFiles: [String] { unreadable.compactMap { $0["file"] }.sorted() }
    }

    /// `kc vault status --json`.
    public struct Status: Decodable, Sendable {
        public var path: String
        public var exists: Bool
        public var unlocked: Bool
        public var items: [String: Int]
        public var workFactor: Int?
        public var hostKey: Bool
        public var lastUnlock: Int64?
        public var lastError: String?
        public var lastErrorTime: Int64?
    }
}

/// An item as `kc ls SERVICE --long --json` lists it, with its exact name bytes.
public struct VaultListedItem: Decodable, Sendable {
    public var name: String
    public var nameBase64: String?
    public var access: String?
    public var thisDeviceOnly: Bool?
    public var size: Int
    public var secondsLeft: Int64?
    public var serial: Int32

    /// The name's bytes (`nameBase64` when it is not UTF-8).
    public var nameBytes: [UInt8] {
        nameBase64.flatMap { Data(base64Encoded: $0) }.map(Array.init) ?? Array(name.utf8)
    }
}

/// The items `kc ls SERVICE --long --json` lists (exact names), none if the service
/// does not exist. The service is passed as bytes through bash.
public func vaultListedItems(_ service: KeyName) throws -> [VaultListedItem] {
    struct Listing: Decodable { var items: [VaultListedItem] }
    let result = try runCommand("/bin/bash", ["-c", "printf -v service '\(bashEscaped(service.bytes))'; exec '\(builtKC)' ls --long --json \"$service\""])
    guard result.status == 0 else { return [] }
    return try JSONDecoder().decode(Listing.self, from: Data(result.standardOutput)).items
}

/// Bytes as a printf format that prints exactly them (`\xff` for every byte but
/// letters and digits), for bash's `printf -v NAME '…'`.
public func bashEscaped(_ bytes: [UInt8]) -> String {
    bytes.map { byte in
        let scalar = Unicode.Scalar(byte)
        if byte < 0x80, CharacterSet.alphanumerics.contains(scalar) { return String(Character(scalar)) }
        return "\\x" + String(byte, radix: 16).leftPadded(to: 2)
    }.joined()
}

private extension String {
    func leftPadded(to width: Int) -> String { String(repeating: "0", count: max(0, width - count)) + self }
}

// MARK: A test case with vaults

/// A test case whose tests make vaults (``makeVault(create:owner:)``), each removed at
/// tearDown after its items were dropped from the kernel, and which can simulate a
/// reboot (``simulateReboot()``). The test process itself runs with `XDG_DATA_HOME`
/// pointing where no vault can be (`/proc`), so the library calls it makes (the base
/// class's cleanup, reads) never write a vault file.
open class VaultTestCase: MountingTestCase {
    /// Where the test process's own (never existing) vault would be.
    public static let noVaultDataHome = "/proc/kc-test-no-vault"

    private var vaults: [VaultFixture] = []
    private var savedDataHome: String?
    private var cleanups: [() -> Void] = []

    open override func setUpWithError() throws {
        try super.setUpWithError()
        savedDataHome = getenv("XDG_DATA_HOME").map { String(cString: $0) }
        setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1)
    }

    open override func tearDownWithError() throws {
        for cleanup in cleanups.reversed() { cleanup() }
        cleanups = []
        for vault in vaults { vault.destroy() }
        vaults = []
        try super.tearDownWithError()
        if let savedDataHome { setenv("XDG_DATA_HOME", savedDataHome, 1) } else { unsetenv("XDG_DATA_HOME") }
    }

    /// A vault of the test's own, made with `kc vault init` unless `create` is false.
    /// With `owner` (a test account), an empty folder of that account's: the account
    /// makes its vault itself.
    public func makeVault(create: Bool = true, owner: String? = nil, inHome: Bool = false,
                          file: StaticString = #filePath, line: UInt = #line) throws -> VaultFixture {
        let vault = try VaultFixture(owner: owner, inHome: inHome)
        vaults.append(vault)
        if create && owner == nil { try vault.create(file: file, line: line) }
        return vault
    }

    /// Runs `body` at tearDown, before the vaults are removed (last registered first).
    public func addCleanup(_ body: @escaping () -> Void) {
        cleanups.append(body)
    }

    /// A reboot as far as this test can see one: the session keyring is emptied, and the
    /// test's services go from the user and persistent keyrings, with the vaults' keys
    /// (a reboot empties both keyrings). Root's user and persistent keyrings are shared
    /// with every other root process, so only the test's own services go, never the whole
    /// keyrings. The vault files stay: this process has no vault.
    public func simulateReboot() {
        try? sessionKeyring.clear()
        for service in servicesToRemove { removeServiceKeyrings(service) }
        for vault in vaults { vault.dropStash() }
    }

    /// The test's mount (``MountingTestCase/mount()``), served by a daemon that writes
    /// to `vault`: it is started with the vault's `XDG_DATA_HOME`.
    public func mount(writingTo vault: VaultFixture) throws -> MountFixture {
        setenv("XDG_DATA_HOME", vault.dataHome, 1)
        defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
        return try mount()
    }

    /// ``simulateReboot()`` then `kc unlock`, which must succeed: its report.
    public func rebootAndUnlock(_ vault: VaultFixture, file: StaticString = #filePath, line: UInt = #line) throws -> VaultFixture.UnlockReport? {
        simulateReboot()
        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 0, "\(result)", file: file, line: line)
        return report
    }

    /// Mounts a small tmpfs (`options`, e.g. `size=256k` or `nr_inodes=64`) as the
    /// vault's folder (`XDG_DATA_HOME`), unmounted at tearDown; XCTSkip where it cannot
    /// be. Make the vault afterwards (``makeVault(create:)`` with `create: false`).
    public func mountTmpfs(on vault: VaultFixture, options: String) throws {
        guard getuid() == 0 else { throw XCTSkip("needs root to mount a small tmpfs") }
        let mounted = try runCommand("/bin/mount", ["-t", "tmpfs", "-o", options + ",mode=0700", "tmpfs", vault.dataHome])
        guard mounted.status == 0 else { throw XCTSkip("cannot mount a tmpfs here: \(mounted.standardError)") }
        addCleanup { _ = try? runCommand("/bin/umount", [vault.dataHome]) }
    }

    /// Fills the tmpfs under `vault` (``mountTmpfs(on:options:)``) to its last byte: big
    /// writes first (`fill`), then byte-sized ones into the last page (`fill2`). Returns
    /// `df -k`'s line for it, which shows ` 100% `. Removing `fill` gives the space back.
    public func fillDisk(of vault: VaultFixture) throws -> CommandResult {
        try runShell("dd if=/dev/zero of='\(vault.dataHome)/fill' bs=64k 2>/dev/null; dd if=/dev/zero of='\(vault.dataHome)/fill2' bs=1 2>/dev/null; df -k '\(vault.dataHome)' | tail -1")
    }

    /// Whether the real age module is built: while the local stand-in
    /// (`Sources/Age/ZZStubForLocalBuild.swift`, no cryptography) is there, tests of
    /// damaged files and of interoperability with `age` mean nothing.
    public static var ageIsTheStandIn: Bool {
        let tests = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
        return FileManager.default.fileExists(atPath: tests.deletingLastPathComponent().appendingPathComponent("Sources/Age/ZZStubForLocalBuild.swift").path)
    }

    public func requireRealAge() throws {
        if Self.ageIsTheStandIn {
            throw XCTSkip("Sources/Age is the local stand-in without cryptography (ZZStubForLocalBuild.swift): this test needs the real age module")
        }
    }
}

// MARK: A test account with vaults

/// The account the vault tests act as when they need another uid than root's: its own
/// key quota (200 keys, 20,000 bytes), user keyring, persistent keyring and home. A
/// test account of the vault tests only (`kc-test-vault`), so a simulated reboot may
/// empty its keyrings whole. Made when the suite runs as root.
public enum VaultAccount {
    public static let name = "kc-test-vault"
    public static let account = TestAccount(name, groups: [])

    /// The account, or XCTSkip where the suite cannot act as it.
    public static func require() throws -> TestAccount {
        guard getuid() == 0 else { throw XCTSkip("needs root, to act as the test account \(name)") }
        guard account.ensure() else { throw XCTSkip("could not create the test account \(name)") }
        _ = UnprivilegedUser.kcCopy
        return account
    }

    public static var uid: String { account.uid }

    /// The directory of the copy of kc the account may run.
    public static var kcPath: String { UnprivilegedUser.kcCopy }

    /// Runs `script` with `sh` as the account, in a fresh session keyring, with the
    /// vault's `XDG_DATA_HOME` (or `HOME`); `$KC` is kc, `$VAULT` the vault folder and
    /// `$PASSPHRASE` the tests' passphrase.
    @discardableResult
    public static func run(_ script: String, vault: VaultFixture, input: [UInt8] = []) throws -> CommandResult {
        let location = vault.inHome
            ? "HOME='\(vault.dataHome)'; export HOME; unset XDG_DATA_HOME; "
            : "XDG_DATA_HOME='\(vault.dataHome)'; export XDG_DATA_HOME; "
        let variables = "VAULT='\(vault.path)'; PASSPHRASE='\(VaultFixture.passphrase)'; unset KC_HOST_KEY_DIR; "
        return withoutSessionNotice(try account.run(location + variables + script, input: input))
    }

    /// The result without the line `keyctl session -` prints on standard error.
    public static func withoutSessionNotice(_ result: CommandResult) -> CommandResult {
        var cleaned = result
        if cleaned.standardError.hasPrefix("Joined session keyring: ") {
            cleaned.standardError = String(cleaned.standardError.drop { $0 != "\n" }.dropFirst())
        }
        return cleaned
    }

    /// A reboot for the account: its user and persistent keyrings emptied (its session
    /// keyrings die with its processes).
    public static func simulateReboot() {
        _ = try? account.run("keyctl clear @u; keyctl clear \"$(keyctl get_persistent @s)\"; true")
    }

    /// Points the account's home (in the password database) at `home`: PAM and the boot
    /// step find the vault there, under `.local/share/kc`.
    public static func setHome(_ home: String) throws {
        let result = try runCommand("/usr/sbin/usermod", ["-d", home, name])
        guard result.status == 0 else { throw XCTSkip("usermod -d failed: \(result)") }
    }

    /// Empties the account's keyrings and locks its password again.
    public static func reset() {
        simulateReboot()
        _ = try? runCommand("/usr/sbin/usermod", ["-p", "!", name])
        _ = try? runCommand("/usr/sbin/usermod", ["-d", "/nonexistent", name])
        UnprivilegedUser.waitForKeyCollection(of: uid)
    }
}

extension UnprivilegedUser {
    /// Waits (at most 10 s) until the kernel collected the keys of `uid`'s dead sessions.
    public static func waitForKeyCollection(of uid: String) {
        waitForKeys(of: uid, toDropTo: 10)
    }
}
