import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// kc run inside a user namespace, as rootless podman runs its secret driver and as
/// `podman unshare` runs anything: the kernel gives that namespace a user keyring of
/// its own (`_uid.0`), which nothing outside sees and which dies with it. What kc
/// stores there must land in the user's own keychain instead.
final class UserNamespaceTests: KeyringTestCase {
    /// `unshare --user --map-root-user sh -c script`, or XCTSkip where user namespaces
    /// are not allowed here.
    private func inUserNamespace(_ script: String) throws -> CommandResult {
        guard programExists("unshare"),
              let probe = try? runCommand("/usr/bin/env", ["unshare", "--user", "--map-root-user", "true"]), probe.status == 0
        else { throw XCTSkip("this kernel or its settings refuse new user namespaces (unshare --user)") }
        return try runCommand("/usr/bin/env", ["unshare", "--user", "--map-root-user", "/bin/sh", "-c", script],
                              environment: ["KC": builtKC, "PATH": "/usr/bin:/bin"])
    }

    func testItemsStoredInsideAUserNamespaceLandInTheUsersOwnKeychain() throws {
        let service = uniqueService()
        let result = try inUserNamespace("""
            printf inside | "$KC" set --access after-first-unlock '\(service)' token || exit 3
            "$KC" get '\(service)' token; echo
            keyctl rlist @u
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n", omittingEmptySubsequences: false)
        XCTAssertEqual(lines.first, "inside", "\(result)")
        XCTAssertEqual(lines.dropFirst().first, "", "the namespace's own user keyring stays empty: \(result)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "token"), "inside", "outside, the item is in the user keyring")
        XCTAssertEqual(try kc("ls", service).output, "token\n")
    }

    func testItemsStoredOutsideAreReadAndRemovedInside() throws {
        let service = uniqueService()
        try Keychain(service: service, accessibility: .afterFirstUnlock).set("outside", forKey: "token")
        let result = try inUserNamespace("""
            "$KC" get '\(service)' token; echo
            "$KC" rm '\(service)' token
            """)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.output, "outside\n")
        XCTAssertNil(try Keychain(service: service).string(forKey: "token"))
    }

    func testTheAlwaysLevelIsAClearErrorInsideAndStoresNothing() throws {
        let service = uniqueService()
        let result = try inUserNamespace("""
            printf v | "$KC" set --access always '\(service)' token
            """)
        XCTAssertEqual(result.status, 2, "\(result)")
        XCTAssertTrue(result.standardError.hasPrefix("kc: the always level cannot be reached from inside a user namespace"), result.standardError)
        XCTAssertTrue(result.standardError.contains("--access after-first-unlock"), result.standardError)
        XCTAssertEqual(try kc("ls", service).output, "", "nothing was stored anywhere")
    }
}
