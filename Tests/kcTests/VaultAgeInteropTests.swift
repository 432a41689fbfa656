import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The vault's files are plain age v1 files (README: the vault on disk): Debian's `age`
/// opens the passphrase-sealed identity and, with it, every item; and an item file
/// `age` made for the vault's recipient loads like one kc wrote. Needs /usr/bin/age
/// (1.1.1) and python3 (age reads a passphrase only from a terminal: a pty drives it).
final class VaultAgeInteropTests: VaultTestCase {
    /// Runs `age ARGUMENTS` on a pseudo-terminal, typing `passphrase` at its prompt.
    private func ageOnTerminal(_ arguments: [String], passphrase: String) throws -> CommandResult {
        try PseudoTerminal.run("/usr/bin/age", arguments, answers: [("passphrase", passphrase)])
    }

    private func requireAge() throws {
        try requireRealAge()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/age") else { throw XCTSkip("age is not installed (/usr/bin/age)") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("python3 is not installed") }
    }

    private func hex(_ bytes: [UInt8]) -> String { bytes.map { String(format: "%02x", $0) }.joined() }

    func testAgeOpensTheVaultsIdentityAndEveryItemFile() throws {
        try requireAge()
        let vault = try makeVault()
        let service = uniqueService()
        let binary: [UInt8] = (0...255).map { UInt8($0) }
        let items: [(name: String, value: [UInt8], options: [String], level: String)] = [
            ("session", Array("session value".utf8), [], "when-unlocked"),
            ("user", Array("user value".utf8), ["--access", "after-first-unlock", "--timeout", "1h"], "after-first-unlock"),
            ("boot", binary, ["--access", "always"], "always"),
        ]
        for item in items { XCTAssertEqual(try vault.set(service, item.name, item.value, options: item.options).status, 0) }

        let identity = vault.dataHome + "/identity.txt"
        let opened = try ageOnTerminal(["-d", "-o", identity, vault.path + "/identity.age"], passphrase: VaultFixture.passphrase)
        XCTAssertEqual(opened.status, 0, "age -d identity.age: \(opened)")
        let identityText = try String(contentsOfFile: identity, encoding: .utf8)
        XCTAssertTrue(identityText.contains("\nAGE-SECRET-KEY-1"), "an age identity file: \(identityText.prefix(60))")
        let recipient = try runCommand("/usr/bin/age-keygen", ["-y", identity])
        XCTAssertEqual(recipient.output, try String(contentsOfFile: vault.path + "/recipient", encoding: .utf8), "the recipient file is its public key")
        let wrong = try ageOnTerminal(["-d", "-o", "/dev/null", vault.path + "/identity.age"], passphrase: "not the passphrase")
        XCTAssertNotEqual(wrong.status, 0, "\(wrong)")

        for item in items {
            let decrypted = try runCommand("/usr/bin/age", ["-d", "-i", identity, vault.itemFile(item.level, service, item.name)])
            XCTAssertEqual(decrypted.status, 0, "age -d \(item.name): \(decrypted)")
            let text = String(decoding: decrypted.standardOutput, as: UTF8.self)
            let header = "kc-vault-item 1\nservice \(hex(Array(service.utf8)))\nname \(hex(Array(item.name.utf8)))\naccess \(item.level)\ndeadline "
            XCTAssertTrue(text.hasPrefix(header), "the kc record: \(text.prefix(200))")
            XCTAssertEqual(Array(decrypted.standardOutput.suffix(item.value.count + 2)), [10, 10] + item.value, "the value, exactly, after the blank line")
            let onDisk = try Data(contentsOf: URL(fileURLWithPath: vault.itemFile(item.level, service, item.name)))
            XCTAssertNil(onDisk.range(of: Data(item.value)), "the file on disk does not hold the value in the clear")
        }
    }

    func testAnItemFileAgeMadeForTheVaultLoadsOnUnlock() throws {
        try requireAge()
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "kc-made", "from kc").status, 0)
        let recipient = try String(contentsOfFile: vault.path + "/recipient", encoding: .utf8).trimmingCharacters(in: .whitespacesAndNewlines)
        let deadline = wallSeconds() + 3600
        func record(_ name: String, _ level: String, deadline: String, value: [UInt8]) -> [UInt8] {
            Array("kc-vault-item 1\nservice \(hex(Array(service.utf8)))\nname \(hex(Array(name.utf8)))\naccess \(level)\ndeadline \(deadline)\nwritten 1\nowner \(getuid())\n\n".utf8) + value
        }
        func place(_ plaintext: [UInt8], _ level: String, _ name: String) throws {
            let folder = vault.path + "/items/\(level)/\(service)"
            try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o700])
            let made = try runCommand("/usr/bin/age", ["-r", recipient, "-o", folder + "/" + name], input: plaintext)
            XCTAssertEqual(made.status, 0, "age -r: \(made)")
            XCTAssertEqual(chmod(folder + "/" + name, 0o600), 0)
        }
        let binary: [UInt8] = [0, 255, 10, 10, 13]
        try place(record("age-made", "after-first-unlock", deadline: String(deadline), value: binary), "after-first-unlock", "age-made")
        try place(Array("hello, not a record\n".utf8), "when-unlocked", "not-a-record")
        simulateReboot()

        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 2, "the file that is no record is reported: \(result)")
        XCTAssertEqual(report?.loaded, ["when-unlocked": 1, "after-first-unlock": 1], "\(result)")
        XCTAssertEqual(report?.unreadable, [["file": vault.itemFile("when-unlocked", service, "not-a-record"), "reason": "opens but is not a kc vault item; move it out of the vault folder"]])
        XCTAssertEqual(try Keychain(service: service).data(forKey: "age-made"), binary)
        let item = try XCTUnwrap(try Keychain(service: service).item("age-made"))
        XCTAssertEqual(item.accessibility, .afterFirstUnlock)
        XCTAssertLessThanOrEqual(abs(wallSeconds() + Int64(item.secondsLeft ?? 0) - deadline), 2, "the record's deadline")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "kc-made"), "from kc")
    }

    /// A vault copied from another machine: its device-only files are encrypted to that
    /// machine's device key (README: the levels), so they are reported, not loaded; new
    /// device-only items cannot be saved until the vault is unlocked once here.
    func testDeviceOnlyItemsOfAnotherMachineAreReportedAndNewOnesWaitForAnUnlockHere() throws {
        try requireAge()
        let vault = try makeVault()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "here", "this machine's", options: ["--this-device-only"]).status, 0)
        let otherKey = vault.dataHome + "/other-machine.key"
        XCTAssertEqual(try runCommand("/usr/bin/age-keygen", ["-o", otherKey]).status, 0)
        let otherRecipient = try runCommand("/usr/bin/age-keygen", ["-y", otherKey]).output.trimmingCharacters(in: .whitespacesAndNewlines)
        try "0123456789abcdef0123456789abcdef \(otherRecipient)\n".write(toFile: vault.path + "/device-recipient", atomically: false, encoding: .utf8)
        let level = "when-unlocked+this-device-only"
        let record = Array("kc-vault-item 1\nservice \(hex(Array(service.utf8)))\nname \(hex(Array("there".utf8)))\naccess \(level)\ndeadline none\nwritten 1\nowner \(getuid())\n\nthat machine's".utf8)
        let there = vault.itemFile(level, service, "there")
        XCTAssertEqual(try runCommand("/usr/bin/age", ["-r", otherRecipient, "-o", there], input: record).status, 0)
        XCTAssertEqual(chmod(there, 0o600), 0)

        let refused = try vault.set(service, "new", "not yet", options: ["--this-device-only"])
        XCTAssertEqual(refused.status, 2, "\(refused)")
        XCTAssertEqual(refused.standardError, "kc: device-only items cannot be saved to the vault at \(vault.path) yet: it came from another machine; run 'kc unlock' once here\n")
        XCTAssertNil(try Keychain(service: service).data(forKey: "new"), "nothing stored in the kernel either")
        XCTAssertEqual(try vault.set(service, "portable", "fine").status, 0, "other items are saved as usual")

        simulateReboot()
        let (result, report) = try vault.unlock()
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertEqual(report?.unreadable, [["file": there, "reason": "is encrypted to another machine's device key (device-only items do not move with the vault); unlock on that machine, or move it out of the vault folder if it is not wanted here"]])
        XCTAssertEqual(try Keychain(service: service).string(forKey: "here"), "this machine's")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "portable"), "fine")
        XCTAssertEqual(try vault.set(service, "new", "now", options: ["--this-device-only"]).status, 0, "after an unlock here")
    }
}
