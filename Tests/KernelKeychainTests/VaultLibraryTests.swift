import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The vault from Swift (README: `Vault.create`, `unlock`, `lock`, `status`,
/// `keychain.ephemeral()`): the same promises as the CLI, with typed errors.
final class VaultLibraryTests: VaultTestCase {
    private let passphrase = Array(VaultFixture.passphrase.utf8)

    /// Runs `body` with this process's writes going to `vault` (its `XDG_DATA_HOME`).
    private func writing<R>(to vault: VaultFixture, _ body: () throws -> R) rethrows -> R {
        setenv("XDG_DATA_HOME", vault.dataHome, 1)
        defer { setenv("XDG_DATA_HOME", Self.noVaultDataHome, 1) }
        return try body()
    }

    private func assertThrows(_ expected: KeychainError, _ body: () throws -> Void, file: StaticString = #filePath, line: UInt = #line) {
        XCTAssertThrowsError(try body(), file: file, line: line) { error in
            XCTAssertEqual(error as? KeychainError, expected, file: file, line: line)
        }
    }

    func testAVaultMadeFromSwiftSavesWritesAndUnlocksWithItsPassphrase() throws {
        let folder = try makeVault(create: false)
        let vault = try Vault.create(at: Vault(path: folder.path), passphrase: passphrase, workFactor: 10)
        XCTAssertTrue(vault.exists)
        XCTAssertTrue(vault.isUnlocked, "create leaves it unlocked")
        let service = uniqueService()
        try writing(to: folder) {
            try Keychain(service: service).set("saved", forKey: "a")
            try Keychain(service: service, accessibility: .always, timeout: .seconds(3600)).set([0, 255], forKey: "b")
            try Keychain(service: service).ephemeral().set("kernel only", forKey: "c")
        }
        XCTAssertEqual(folder.itemFiles(), ["always/\(service)/b", "when-unlocked/\(service)/a"])
        let status = try vault.status()
        XCTAssertEqual(status.itemCounts[.whenUnlocked], 1)
        XCTAssertEqual(status.itemCounts[.always], 1)
        XCTAssertEqual(status.workFactor, 10)

        let (dropped, wasUnlocked, skipped) = try vault.lock(levels: [.whenUnlocked, .always])
        XCTAssertEqual(skipped, [])
        XCTAssertEqual(dropped, 2)
        XCTAssertTrue(wasUnlocked)
        XCTAssertFalse(vault.isUnlocked)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "c"), "kernel only", "lock leaves ephemeral items")
        simulateReboot()

        assertThrows(.wrongPassphrase(path: folder.path)) { _ = try vault.unlock(passphrase: Array("wrong".utf8)) }
        let report = try vault.unlock(passphrase: passphrase)
        XCTAssertEqual(report.loaded, [.whenUnlocked: 1, .always: 1])
        XCTAssertTrue(report.isClean)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "a"), "saved")
        XCTAssertEqual(try Keychain(service: service).data(forKey: "b"), [0, 255])
        XCTAssertTrue((3500...3600).contains(try Keychain(service: service).item("b")?.secondsLeft ?? 0))
        XCTAssertNil(try Keychain(service: service).data(forKey: "c"))
        XCTAssertEqual(try vault.unlock(passphrase: passphrase).alreadyLoaded, 2)
    }

    func testMakingOrChangingAVaultRefusesBadInputWithTypedErrors() throws {
        let folder = try makeVault(create: false)
        let place = Vault(path: folder.path)
        assertThrows(.weakPassphrase) { _ = try Vault.create(at: place, passphrase: [], workFactor: 10) }
        assertThrows(.invalidWorkFactor(23)) { _ = try Vault.create(at: place, passphrase: self.passphrase, workFactor: 23) }
        assertThrows(.invalidWorkFactor(9)) { _ = try Vault.create(at: place, passphrase: self.passphrase, workFactor: 9) }
        XCTAssertFalse(place.exists)
        assertThrows(.vaultNotInitialized(path: folder.path)) { _ = try place.unlock(passphrase: self.passphrase) }

        let vault = try Vault.create(at: place, passphrase: passphrase, workFactor: 10)
        assertThrows(.vaultAlreadyExists(path: folder.path)) { _ = try Vault.create(at: place, passphrase: self.passphrase, workFactor: 10) }
        assertThrows(.wrongPassphrase(path: folder.path)) { try vault.changePassphrase(from: Array("wrong".utf8), to: Array("new".utf8)) }
        assertThrows(.weakPassphrase) { try vault.changePassphrase(from: self.passphrase, to: []) }
        try vault.changePassphrase(from: passphrase, to: Array("new".utf8))
        assertThrows(.wrongPassphrase(path: folder.path)) { _ = try vault.unlock(passphrase: self.passphrase) }
        XCTAssertTrue(try vault.unlock(passphrase: Array("new".utf8)).isClean)
    }
}
