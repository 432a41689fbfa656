import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// `kc exec`: items handed to a command as environment variables or files.
final class ExecTests: KeyringTestCase {
    func testExecHelpPrintsHelpRatherThanAnError() throws {
        let help = try kc("exec", "--help")
        XCTAssertEqual(help.status, 0, "\(help)")
        XCTAssertTrue(help.output.hasPrefix("OVERVIEW: Run a command with a service's items"), help.output)
        XCTAssertTrue(help.output.contains("--allow-env"), help.output)
    }

    private func service(with items: [String: String]) throws -> String {
        let service = uniqueService()
        for (name, value) in items { try Keychain(service: service).set(value, forKey: name) }
        return service
    }

    func testEnvExportsItemsUnderShellNamesAndPassesTheExitStatus() throws {
        let service = try service(with: ["token": "s3cret", "db.password": "pw 1", "9lives": "cat"])
        let result = try kc("exec", "--service", service, "--env", "--", "/bin/sh", "-c",
                            "printf '%s|%s|%s' \"$TOKEN\" \"$DB_PASSWORD\" \"$_9LIVES\"; exit 7")
        XCTAssertEqual(result.output, "s3cret|pw 1|cat")
        XCTAssertEqual(result.status, 7, "the command's status is kc's")
    }

    func testEnvNameCollisionsAndNULBytesAreErrors() throws {
        let service = try service(with: ["db.password": "a", "db-password": "b"])
        let collision = try kc("exec", "--service", service, "--env", "--", "/bin/true")
        XCTAssertEqual(collision.status, 2)
        XCTAssertTrue(collision.standardError.contains("both become $DB_PASSWORD"), collision.standardError)

        let binary = uniqueService()
        try Keychain(service: binary).set([0x61, 0x00, 0x62], forKey: "blob")
        let nul = try kc("exec", "--service", binary, "--env", "--", "/bin/true")
        XCTAssertEqual(nul.status, 2)
        XCTAssertTrue(nul.standardError.contains("NUL byte"), nul.standardError)
    }

    func testFilesArePrivateReadOnlyAndGoneAfterwards() throws {
        let service = try service(with: ["token": "s3cret", "cert.pem": "-----BEGIN-----\n"])
        let result = try kc("exec", "--service", service, "--files", "--", "/bin/sh", "-c", """
            d="$CREDENTIALS_DIRECTORY"; echo "$d"
            stat -c '%a %U' "$d" "$d/token" "$d/cert.pem"
            cat "$d/token"; echo
            printf x > "$d/token" 2>/dev/null && echo writable || echo read-only
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n").map(String.init)
        let owner = NSUserName()
        XCTAssertEqual(Array(lines.dropFirst().prefix(3)), ["500 \(owner)", "400 \(owner)", "400 \(owner)"])
        XCTAssertEqual(lines[4], "s3cret")
        if getuid() != 0 { XCTAssertEqual(lines[5], "read-only") }
        XCTAssertFalse(FileManager.default.fileExists(atPath: lines[0]), "the directory is removed after the command")
    }

    func testUsageErrors() throws {
        let service = try service(with: ["k": "v"])
        XCTAssertEqual(try kc("exec", "--env", "--", "/bin/true").status, 64, "a service is required")
        XCTAssertEqual(try kc("exec", "--service", service, "--", "/bin/true").status, 64, "--env or --files")
        XCTAssertEqual(try kc("exec", "--service", service, "--env").status, 64, "a command")
        XCTAssertEqual(try kc("exec", "--service", service + ".absent", "--env", "--", "/bin/true").status, 1)
        let missing = try kc("exec", "--service", service, "--env", "--", "/nonexistent/program")
        XCTAssertEqual(missing.status, 127)
        XCTAssertTrue(missing.standardError.hasPrefix("kc: cannot run"), missing.standardError)
    }

    /// Starts `kc exec` running `sleep`, and returns it with the directory and the
    /// command's pid once the command is running.
    private func startSleeping(_ service: String) throws -> (Process, directory: String, child: pid_t) {
        let marker = NSTemporaryDirectory() + "kc-exec-marker-\(UUID().uuidString)"
        let process = Process()
        process.executableURL = URL(fileURLWithPath: builtKC)
        process.arguments = ["exec", "--service", service, "--env", "--files", "--", "/bin/sh", "-c",
                             "echo \"$$ $CREDENTIALS_DIRECTORY\" > '\(marker).tmp'; mv '\(marker).tmp' '\(marker)'; exec sleep 30"]
        try process.run()
        for _ in 0..<200 where !FileManager.default.fileExists(atPath: marker) { usleep(20_000) }
        let fields = try String(contentsOfFile: marker, encoding: .utf8).split(separator: " ")
        try? FileManager.default.removeItem(atPath: marker)
        let directory = String(fields[1]).trimmingCharacters(in: .whitespacesAndNewlines)
        return (process, directory, pid_t(fields[0]) ?? 0)
    }

    func testSignalsReachTheCommandAndTheDirectoryIsRemoved() throws {
        let service = try service(with: ["token": "never-in-kc-environment"])
        let (process, directory, _) = try startSleeping(service)
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory + "/token"))
        let commandLine = try Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.processIdentifier)/cmdline"))
        // kc is not dumpable, so only root may read its environment at all.
        if let environment = try? Data(contentsOf: URL(fileURLWithPath: "/proc/\(process.processIdentifier)/environ")) {
            XCTAssertEqual(getuid(), 0, "kc's environment is readable by its own uid")
            XCTAssertNil(environment.range(of: Data("never-in-kc".utf8)), "no secret in kc's own environment")
        } else {
            XCTAssertNotEqual(getuid(), 0, "root reads any process's environment")
        }
        XCTAssertNil(commandLine.range(of: Data("never-in-kc".utf8)), "nor in its argv")

        process.terminate()  // SIGTERM to kc, passed on to sleep
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        XCTAssertEqual(process.terminationStatus, SIGTERM, "kc dies of the signal its command died of")
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory))
    }

    func testTheDirectoryIsRemovedWhenTheCommandIsKilled() throws {
        let service = try service(with: ["token": "t"])
        let (process, directory, child) = try startSleeping(service)
        kill(child, SIGKILL)
        process.waitUntilExit()
        XCTAssertEqual(process.terminationReason, .uncaughtSignal)
        XCTAssertEqual(process.terminationStatus, SIGKILL)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory))
    }

    func testADirectoryLeftByAKilledKcIsRemovedByTheNextRun() throws {
        let service = try service(with: ["token": "t"])
        let (process, directory, child) = try startSleeping(service)
        kill(process.processIdentifier, SIGKILL)
        kill(child, SIGKILL)  // Foundation's Process waits for the whole tree
        process.waitUntilExit()
        XCTAssertTrue(FileManager.default.fileExists(atPath: directory), "SIGKILL leaves it behind")
        XCTAssertEqual(try kc("exec", "--service", service, "--files", "--", "/bin/true").status, 0)
        XCTAssertFalse(FileManager.default.fileExists(atPath: directory), "the next kc exec removes it")
    }
}
