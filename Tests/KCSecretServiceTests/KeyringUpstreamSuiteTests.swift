import Foundation
import KCTestSupport
import XCTest

/// python keyring's own backend tests (its PyPI source release, the version Debian 12
/// ships: 23.9.3), run by pytest with Debian's python3-keyring against kc-secretd: the
/// shared `BackendBasicTests` (`keyring.testing.backend`: set, get, delete, difficult and
/// non-ASCII characters, credentials, several users of one service) through two
/// backends, SecretService (python SecretStorage on jeepney) and libsecret (libsecret
/// 0.20.5 itself, through PyGObject). Both store in the `session` collection, as
/// upstream's tests ask.
final class KeyringUpstreamSuiteTests: KeyringTestCase {
    static let backendTests = ["tests/backends/test_SecretService.py", "tests/backends/test_libsecret.py"]

    func testKeyringsOwnSecretServiceAndLibsecretBackendTestsPass() throws {
        try SecretServiceClients.requirePython(["keyring.backends.SecretService", "keyring.backends.libsecret", "secretstorage"])
        let version = try UpstreamPythonSuite.installedVersion(of: "keyring")
        let suite = try UpstreamPythonSuite("keyring", version: version, members: Self.backendTests)
        let bus = try startSecretServiceBus()

        let outcome = try suite.run(Self.backendTests, on: bus)

        outcome.assertNoFailures()
        XCTAssertEqual(outcome.package("keyring").file, "/usr/lib/python3/dist-packages/keyring/__init__.py",
                       "the library under test is Debian's python3-keyring")
        XCTAssertEqual(outcome.skipped, [:], "a backend that is not viable here skips its tests: python3-gi and gir1.2-secret-1 for libsecret")
        for backend in ["test_SecretService.py::TestSecretServiceKeyring", "test_libsecret.py::TestLibSecretKeyring"] {
            for test in ["test_password_set_get", "test_difficult_chars", "test_delete_present", "test_delete_not_present",
                         "test_delete_one_in_group", "test_unicode_chars", "test_unicode_and_ascii_chars", "test_different_user",
                         "test_credential", "test_set_properties", "test_new_with_properties"] {
                let node = "tests/backends/\(backend)::\(test)"
                XCTAssertTrue(outcome.passed.contains(node), "\(node) passed: \(outcome.json)")
            }
        }
        XCTAssertGreaterThanOrEqual(outcome.passed.count, 26, "\(outcome.passed.sorted())")
    }
}
