import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// One view of what exists (issue 25): with the vault unlocked, every door that lists
/// (`kc ls`, `kc ls --long`, `kc exec`, `kc export`, the mount, the podman driver's
/// list, the library's `allKeys`/`items`/`services`) shows the items the vault holds for
/// this session, loading them into the kernel as `kc get` does on a miss; locked, they
/// show only what the kernel has.
final class VaultEveryDoorTests: VaultTestCase {
    private let names = ["afu", "al", "wu"]

    /// A vault with one item at each level in a new service, unlocked, then the
    /// kernel's copies gone (a new login session, an expired persistent keyring) while
    /// the vault's key stays in the user keyring.
    private func unlockedVaultWhoseItemsTheKernelLost() throws -> (VaultFixture, String) {
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "wu", "when-unlocked value").status, 0)
        XCTAssertEqual(try vault.set(service, "afu", "after-first-unlock value", options: ["--access", "after-first-unlock"]).status, 0)
        XCTAssertEqual(try vault.set(service, "al", "always value", options: ["--access", "always"]).status, 0)
        XCTAssertEqual(try vault.unlock().result.status, 0)
        removeServiceKeyrings(KeyName(service))
        XCTAssertTrue(vault.isStashed)
        XCTAssertEqual(try Keychain(service: service).allKeys(), [], "the kernel lost them (this process has no vault)")
        return (vault, service)
    }

    private func lines(_ result: CommandResult) -> [String] {
        result.output.split(separator: "\n").map(String.init)
    }

    private func assertLoadedBack(_ service: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let levels = try Keychain(service: service).items().map { "\($0.name)=\($0.accessibility?.name ?? "-")" }
        XCTAssertEqual(levels, ["afu=after-first-unlock", "al=always", "wu=when-unlocked"], "loaded at their levels", file: file, line: line)
    }

    func testKcLsListsWhatTheUnlockedVaultHolds() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let listed = try vault.kc("ls", service)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(lines(listed), names)
        try assertLoadedBack(service)
    }

    func testKcLsLongListsThemWithTheirLevels() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let listed = try vault.kc("ls", "--long", service)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(lines(listed).map { $0.split(separator: "\t").prefix(2).joined(separator: " ") },
                       ["afu after-first-unlock", "al always", "wu when-unlocked"])
    }

    func testKcLsOfServicesListsAServiceOnlyTheVaultHolds() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let listed = try vault.kc("ls")
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertTrue(lines(listed).contains(service), "\(listed)")
        try assertLoadedBack(service)
    }

    func testKcExecSeesThem() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let run = try vault.kc("exec", "--service", service, "--env", "--", "/usr/bin/env")
        XCTAssertEqual(run.status, 0, "\(run)")
        for expected in ["AFU=after-first-unlock value", "AL=always value", "WU=when-unlocked value"] {
            XCTAssertTrue(lines(run).contains(expected), "\(expected): \(run)")
        }
    }

    func testKcExportIncludesThem() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        for arguments in [["export", "--service", service], ["export"]] {
            let exported = try vault.kc(arguments)
            XCTAssertEqual(exported.status, 0, "\(exported)")
            let items = try KeychainArchive.decodeJSON(exported.standardOutput).filter { $0.service == KeyName(service) }
            XCTAssertEqual(items.map(\.name.description).sorted(), names, "\(arguments)")
            removeServiceKeyrings(KeyName(service))
        }
    }

    func testThePodmanDriversListShowsThem() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let listed = try vault.kc("podman-driver", "--service", service, "list")
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(lines(listed), names)
    }

    func testTheMountsDirectoriesShowThem() throws {
        try MountFixture.requireFUSE()
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let mount = try mount(writingTo: vault)
        XCTAssertTrue(try FileManager.default.contentsOfDirectory(atPath: mount.path).contains(service), "the root lists the service")
        try assertLoadedBack(service)
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try FileManager.default.contentsOfDirectory(atPath: mount.file(service)).sorted(), names, "a service's folder too")
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try String(contentsOfFile: mount.file(service, "al"), encoding: .utf8), "always value", "and a file, as kc get")
    }

    func testTheLibrarysListingsShowThem() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        // The kernel's copies are removed with this process's own (absent) vault, so
        // that the vault's files stay.
        func withVault<R>(_ body: () throws -> R) rethrows -> R {
            setenv("XDG_DATA_HOME", vault.dataHome, 1)
            defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
            return try body()
        }
        XCTAssertTrue(try withVault { try Keychain.services() }.contains(KeyName(service)))
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try withVault { try Keychain(service: service).allKeys() }, names)
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try withVault { try Keychain(service: service).items() }.map(\.name.description), names)
        removeServiceKeyrings(KeyName(service))
        XCTAssertEqual(try withVault { try Keychain(service: service).itemNames() }.map(\.description), names)
        removeServiceKeyrings(KeyName(service))
        XCTAssertTrue(try withVault { try Keychain(service: service).serviceExists() })
        try assertLoadedBack(service)
    }

    func testOnlyTheMissingItemsAreLoaded() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        XCTAssertEqual(try vault.get(service, "al").output, "always value", "one is back (a read's miss)")
        let serial = try XCTUnwrap(Keychain(service: service).item("al")?.serial)
        XCTAssertEqual(lines(try vault.kc("ls", service)), names)
        XCTAssertEqual(try Keychain(service: service).item("al")?.serial, serial, "the item the kernel held is left as it was")
    }

    func testAListingTheKernelHoldsWhollyOpensNoVaultFile() throws {
        guard programExists("strace") else { throw XCTSkip("strace is needed to see which files kc opens") }
        // kc makes itself non-dumpable at start (no core dumps of secrets), after which
        // only a tracer with CAP_SYS_PTRACE can read the paths it passes to openat.
        guard getuid() == 0 else { throw XCTSkip("needs root: strace of a non-dumpable kc shows its paths only to root") }
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        XCTAssertEqual(lines(try vault.kc("ls", service)), names)
        // Files below the vault's folder are opened from it (openat2, relative paths).
        let traced = try vault.bash("strace -f -e trace=open,openat,openat2 -o /dev/stderr '\(builtKC)' ls '\(service)' 2>&1 >/dev/null")
        XCTAssertTrue(traced.output.contains("items/when-unlocked/\(service)\""), "the names on disk are read: \(traced.output)")
        for name in names {
            XCTAssertFalse(traced.output.contains("/\(service)/\(name)\""), "no item file is opened when the kernel has every name: \(traced.output)")
        }
        XCTAssertFalse(traced.output.contains("\(vault.path)/lock\"") || traced.output.contains("\"lock\""), "nor the vault's lock taken")
    }

    func testAListingLoadsWhenUnlockedItemsOnlyInALoginSessionThatUnlocked() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        let outside = try vault.bash("keyctl session - '\(builtKC)' ls '\(service)' 2>/dev/null")
        XCTAssertEqual(lines(outside), ["afu", "al"], "a new session that did not unlock: \(outside)")
        // A session that unlocked, whose when-unlocked item is gone from the kernel since.
        let script = """
            printf %s "$1" | "$2" unlock >/dev/null 2>&1
            keyctl invalidate "$(keyctl search @s user wu)"
            "$2" ls "$3"
            """
        let unlocked = try vault.bash("keyctl session - bash -c '\(script)' _ '\(VaultFixture.passphrase)' '\(builtKC)' '\(service)' 2>/dev/null")
        XCTAssertEqual(lines(unlocked), names, "\(unlocked)")
    }

    func testAProcessWithoutALoginSessionDoesNotGetWhenUnlockedItems() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        // The kernel's shared default session keyring is described `_uid_ses.UID`.
        let listed = try vault.bash("keyctl session '_uid_ses.kc-test-\(getpid())' '\(builtKC)' ls '\(service)' 2>/dev/null")
        XCTAssertEqual(lines(listed), ["afu", "al"], "\(listed)")
    }

    func testWithTheVaultLockedListingsShowOnlyTheKernel() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        XCTAssertEqual(try vault.get(service, "al").output, "always value")
        vault.dropStash()
        let listed = try vault.kc("ls", service)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(lines(listed), ["al"], "only what the kernel has")
        let services = try vault.kc("ls")
        XCTAssertEqual(services.status, 0)
        removeServiceKeyrings(KeyName(service))
        XCTAssertFalse(lines(try vault.kc("ls")).contains(service))
        XCTAssertEqual(try vault.kc("ls", service).status, 1, "no such service in the kernel")
    }

    func testADamagedFileDoesNotStopAListing() throws {
        let (vault, service) = try unlockedVaultWhoseItemsTheKernelLost()
        try Data("not an age file".utf8).write(to: URL(fileURLWithPath: vault.itemFile("always", service, "al")))
        let listed = try vault.kc("ls", service)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(lines(listed), ["afu", "wu"], "the others load; kc unlock names the damaged file")
        XCTAssertTrue(FileOps.exists(vault.itemFile("always", service, "al")), "and it is left for the user")
    }

    func testABadServiceNameIsRefusedBeforeTheVaultIsLookedAt() throws {
        let vault = try makeVault()
        for bad in ["a/b", "..", String(repeating: "x", count: 256)] {
            let listed = try vault.kc("ls", bad)
            XCTAssertEqual(listed.status, 64, "\(bad): \(listed)")
        }
    }
}
