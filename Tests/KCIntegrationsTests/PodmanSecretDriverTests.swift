import KCIntegrations
import KernelKeychain
import XCTest

/// podman's shell driver as `kc podman-driver` sets it up, in-process: the commands
/// podman runs, quoted for /bin/sh and TOML, and the secret id podman passes.
final class PodmanSecretDriverTests: XCTestCase {
    func testTheDriverOptionsRunThisKcForEachAction() {
        let command = PodmanSecretDriver.driverCommand(executable: "/usr/bin/kc", service: "podman", level: .afterFirstUnlock)
        XCTAssertEqual(command, "'/usr/bin/kc' podman-driver", "the defaults are not spelled out")
        XCTAssertEqual(PodmanSecretDriver.driverOptions(command: command),
                       "list='/usr/bin/kc' podman-driver list,lookup='/usr/bin/kc' podman-driver lookup,"
                           + "store='/usr/bin/kc' podman-driver store,delete='/usr/bin/kc' podman-driver delete")
    }

    func testAnotherServiceOrLevelIsPartOfEveryCommand() {
        XCTAssertEqual(PodmanSecretDriver.driverCommand(executable: "/usr/bin/kc", service: "com.example.ci", level: .always),
                       "'/usr/bin/kc' podman-driver --service 'com.example.ci' --access always")
        XCTAssertEqual(PodmanSecretDriver.driverCommand(executable: "/usr/bin/kc", service: "podman", level: .whenUnlocked),
                       "'/usr/bin/kc' podman-driver --access when-unlocked")
    }

    func testPathsAndServicesAreQuotedForTheShellPodmanRuns() {
        XCTAssertEqual(PodmanSecretDriver.driverCommand(executable: "/opt/it's here/kc", service: "a'b $(x)", level: .afterFirstUnlock),
                       #"'/opt/it'\''s here/kc' podman-driver --service 'a'\''b $(x)'"#)
    }

    func testTheContainersConfSnippetIsValidTOML() {
        let command = PodmanSecretDriver.driverCommand(executable: #"/opt/a"b\c/kc"#, service: "podman", level: .afterFirstUnlock)
        XCTAssertEqual(PodmanSecretDriver.containersConfiguration(command: command), #"""
            [secrets]
            driver = "shell"

            [secrets.opts]
            list = "'/opt/a\"b\\c/kc' podman-driver list"
            lookup = "'/opt/a\"b\\c/kc' podman-driver lookup"
            store = "'/opt/a\"b\\c/kc' podman-driver store"
            delete = "'/opt/a\"b\\c/kc' podman-driver delete"
            """#)
    }

    func testTheActionsAreTheFourPodmanRuns() {
        XCTAssertEqual(PodmanSecretDriver.Action.allCases.map(\.rawValue), ["list", "lookup", "store", "delete"])
        XCTAssertEqual(PodmanSecretDriver.defaultService, "podman")
        XCTAssertEqual(PodmanSecretDriver.defaultLevel, .afterFirstUnlock)
    }

    func testTheSecretIDIsAnItemName() throws {
        XCTAssertEqual(try PodmanSecretDriver.secretID(fromEnvironment: "8e3a0b8b5f6c4d2e1a9b7c6d5"), "8e3a0b8b5f6c4d2e1a9b7c6d5")
        XCTAssertNil(try PodmanSecretDriver.secretID(fromEnvironment: nil), "unset: podman did not run this")
        XCTAssertNil(try PodmanSecretDriver.secretID(fromEnvironment: ""))
        for bad in ["a/b", ".", "..", String(repeating: "x", count: 256)] {
            XCTAssertThrowsError(try PodmanSecretDriver.secretID(fromEnvironment: bad), bad) { error in
                guard case .invalidName(kind: .item, _)? = error as? KeychainError else { return XCTFail("\(bad): \(error)") }
            }
        }
    }
}
