import Foundation
import KCTestSupport
import XCTest

/// `kc doctor`'s line for the Secret Service: who owns `org.freedesktop.secrets` on the
/// session bus and whether it answers, or that there is no session bus.
final class SecretServiceDoctorTests: KeyringTestCase {
    /// The `secret service` line of `kc doctor` and its entry in `kc doctor --json`.
    private func secretServiceCheck(_ run: ([String]) throws -> CommandResult,
                                    file: StaticString = #filePath, line: UInt = #line) throws -> (line: String, status: String, detail: String) {
        let text = try run(["doctor"])
        let found = text.output.split(separator: "\n").map(String.init).filter { $0.contains("secret service: ") }
        XCTAssertEqual(found.count, 1, "one line for the Secret Service: \(text)", file: file, line: line)
        let json = try run(["doctor", "--json"])
        let object = try JSONSerialization.jsonObject(with: Data(json.standardOutput)) as? [String: Any]
        let checks = try XCTUnwrap(object?["checks"] as? [[String: Any]], "\(json)", file: file, line: line)
        let entry = try XCTUnwrap(checks.first { $0["name"] as? String == "secret service" }, "\(json)", file: file, line: line)
        return (found.first ?? "", entry["status"] as? String ?? "", entry["detail"] as? String ?? "")
    }

    func testDoctorSaysKCSecretdOwnsTheNameAndAnswers() throws {
        let bus = try startSecretServiceBus()
        let pid = try XCTUnwrap(bus.activatedOwner(), "kc-secretd started by activation")
        let check = try secretServiceCheck { try bus.run(builtKC, $0) }
        XCTAssertEqual(check.line, "ok   secret service: kc-secretd (pid \(pid)) owns org.freedesktop.secrets and answers")
        XCTAssertEqual(check.status, "ok")
        XCTAssertEqual(check.detail, "kc-secretd (pid \(pid)) owns org.freedesktop.secrets and answers")
        XCTAssertEqual(try bus.run(builtSecretd, ["status"]).output, "kc-secretd (pid \(pid)) owns org.freedesktop.secrets and answers\n")
    }

    func testDoctorSaysThereIsNoSessionBusWithoutOne() throws {
        var environment = environmentWithoutVault()
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        environment["XDG_RUNTIME_DIR"] = nil
        let check = try secretServiceCheck { try runCommand(builtKC, $0, environment: environment) }
        XCTAssertEqual(check.line, "warn secret service: no session bus here, so no Secret Service: run the program under 'dbus-run-session', or log in with dbus-user-session")
        XCTAssertEqual(check.status, "warn")
    }

    func testDoctorSaysWhenNobodyOwnsTheNameYet() throws {
        let bus = try SessionBus(environment: environmentWithoutVault(), serviceExec: nil)
        defer { bus.stop() }
        let check = try secretServiceCheck { try bus.run(builtKC, $0) }
        XCTAssertEqual(check.status, "warn", check.line)
        XCTAssertTrue(check.detail.hasPrefix("nobody owns org.freedesktop.secrets yet"), check.detail)
    }
}
