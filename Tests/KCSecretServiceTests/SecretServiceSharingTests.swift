import Foundation
import KCTestSupport
import XCTest

/// A client's secret stays the user's: a new item stored over D-Bus never goes into a kc
/// service the user shares with a group (`kc set --group`, `kc share`), where a member
/// would read it, but into a service of its own. Checked with a real member of the
/// group: `kc-test` owns the service and runs kc-secretd, `kc-test-member` shares its group.
final class SecretServiceSharingTests: XCTestCase {
    private let owner = TestAccount.owner, member = TestAccount.member
    private let group = TestAccount.shareGroup
    private var service = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard KeyringTestCase.syscallsWork else { throw XCTSkip("kernel keyring system calls are unavailable here (seccomp or no CONFIG_KEYS)") }
        TestRunCleanup.register()  // the python client's folder in /tmp goes at the end of the run
        guard getuid() == 0 else { throw XCTSkip("needs root, to act as the owner and a member of a group") }
        guard owner.ensure(), member.ensure() else { throw XCTSkip("could not create the test users and group (useradd/groupadd/usermod)") }
        try SecretServiceClients.requireSecretTool()
        try SecretServiceClients.requirePython()
        service = "kc-test-ss-share.\(getpid()).\(UInt32.random(in: 0...UInt32.max))"
    }

    override func tearDownWithError() throws {
        // Every service of the owner's whose name begins with the test's (the shared one,
        // and any kc-secretd chose instead).
        _ = try? owner.run("""
            "$KC" ls 2>/dev/null | grep -F -- '\(service)' | while IFS= read -r s; do "$KC" rm --yes "$s" >/dev/null 2>&1; done; true
            """)
        try super.tearDownWithError()
    }

    func testAClientsNewItemNeverGoesIntoAServiceTheUserSharesWithAGroup() throws {
        let shared = try owner.run("printf team | \"$KC\" set --group \(group) --access after-first-unlock '\(service)' deploy")
        XCTAssertEqual(shared.status, 0, "kc set --group: \(shared)")

        // The owner's clients store under the shared service's name: python (SecretStorage's
        // way) and secret-tool; both find their items again.
        let out = try SecretServiceClients.pythonAsTestUser("""
            import subprocess
            c = Client()
            s = c.open('dh')
            c.create(s, {'service': sys.argv[1], 'username': 'alice'}, b'client-s3cret')
            tool = subprocess.run(['secret-tool', 'store', '--label', 'carol', 'service', sys.argv[1], 'username', 'carol'],
                                  input=b'tool-s3cret', capture_output=True)
            found = {}
            for user in ('alice', 'carol'):
                items, locked = c.search({'service': sys.argv[1], 'username': user})
                found[user] = [text(c.secret(s, item)[0]) for item in items]
            looked = subprocess.run(['secret-tool', 'lookup', 'service', sys.argv[1], 'username', 'carol'], capture_output=True)
            emit(tool=tool.returncode, found=found, looked=looked.stdout.decode())
            """.replacingOccurrences(of: "sys.argv[1]", with: "'\(service)'"))
        XCTAssertEqual(out["tool"], 0, "secret-tool store: \(out)")
        XCTAssertEqual(out["found"], ["alice": ["client-s3cret"], "carol": ["tool-s3cret"]], "each client finds its item: \(out)")
        XCTAssertEqual(out["looked"], "tool-s3cret")

        // A member of the group reads what the owner shared, and nothing a client stored.
        let asMember = try member.run("""
            "$KC" get --from \(owner.name) '\(service)' alice; echo " alice=$?"
            "$KC" get --from \(owner.name) '\(service)' carol; echo " carol=$?"
            "$KC" get --from \(owner.name) '\(service)' deploy; echo " deploy=$?"
            "$KC" ls --shared
            """)
        XCTAssertFalse(asMember.output.contains("client-s3cret"), "a member never reads the client's secret: \(asMember)")
        XCTAssertFalse(asMember.output.contains("tool-s3cret"), "nor secret-tool's: \(asMember)")
        XCTAssertTrue(asMember.output.contains(" alice=1\n"), "\(asMember)")
        XCTAssertTrue(asMember.output.contains(" carol=1\n"), "\(asMember)")
        XCTAssertTrue(asMember.output.contains("team deploy=0\n"), "the sharing the owner chose still works: \(asMember)")

        // The shared service holds what the owner put there, and only that.
        let listed = try owner.run("\"$KC\" ls '\(service)'")
        XCTAssertEqual(listed.output, "deploy\n", "\(listed)")
    }
}
