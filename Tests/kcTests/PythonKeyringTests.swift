import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// The python `keyring` backend in Integrations/python, installed with pip into a
/// temporary folder and driven through Debian's real `keyring` command and library,
/// with no D-Bus: what kc stores is what keyring reads, byte for byte.
final class PythonKeyringTests: KeyringTestCase {
    private static let python = "/usr/bin/python3"
    private static let keyringCommand = "/usr/bin/keyring"
    /// /tmp/kc-test-pykeyring-PID: the package's copy (pip builds in it), the
    /// installed package, and HOME (so no keyringrc.cfg or vault of the caller counts).
    private static let folder = "/tmp/kc-test-pykeyring-\(getpid())"
    nonisolated(unsafe) private static var installError: String?
    nonisolated(unsafe) private static var installed = false

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard FileManager.default.isExecutableFile(atPath: Self.python) else {
            throw XCTSkip("\(Self.python) is missing (Tools/install-deps.sh --tests installs it)")
        }
        guard FileManager.default.isExecutableFile(atPath: Self.keyringCommand),
              try runCommand(Self.python, ["-c", "import keyring"]).status == 0 else {
            throw XCTSkip("python3-keyring is missing (Tools/install-deps.sh --tests installs it)")
        }
        guard try runCommand(Self.python, ["-m", "pip", "--version"]).status == 0 else {
            throw XCTSkip("pip is missing for \(Self.python) (Debian's python3-pip)")
        }
        try Self.installOnce()
        if let installError = Self.installError { XCTFail(installError) }
    }

    override class func tearDown() {
        try? FileManager.default.removeItem(atPath: folder)
        super.tearDown()
    }

    private static func installOnce() throws {
        guard !installed else { return }
        installed = true
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Integrations/python").path
        try? FileManager.default.removeItem(atPath: folder)
        try FileManager.default.createDirectory(atPath: folder + "/home", withIntermediateDirectories: true)
        // A copy, so pip's in-tree build (build/, *.egg-info) stays out of the repository.
        try FileManager.default.copyItem(atPath: source, toPath: folder + "/source")
        let result = try runCommand(python, ["-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-deps",
                                             "--disable-pip-version-check", "--no-cache-dir",
                                             "--target", folder + "/lib", folder + "/source"],
                                    environment: ["PATH": "/usr/bin:/bin", "HOME": folder + "/home"])
        if result.status != 0 { installError = "pip install of Integrations/python failed: \(result)" }
    }

    /// No D-Bus, no keyring configuration, the built kc first on PATH.
    private func environment(_ extra: [String: String] = [:]) -> [String: String] {
        let home = Self.folder + "/home"
        return [
            "PATH": URL(fileURLWithPath: builtKC).deletingLastPathComponent().path + ":/usr/bin:/bin",
            "PYTHONPATH": Self.folder + "/lib",
            "HOME": home, "XDG_CONFIG_HOME": home + "/.config", "XDG_DATA_HOME": home + "/.local/share",
            "LANG": "C.UTF-8",
            // The backend's own behaviour: where libsecret's python binding is installed
            // (the tests install it) keyring chains kc with libsecret, whose reads fail
            // with no bus. testKeyringListsTheBackendAndChoosesItWithoutDBus checks the
            // default choice without this.
            "PYTHON_KEYRING_BACKEND": "keyring_kc.Keyring",
        ].merging(extra) { $1 }.filter { !$0.value.isEmpty }  // "" in `extra` unsets
    }

    private func keyring(_ arguments: String..., input: String = "", environment extra: [String: String] = [:]) throws -> CommandResult {
        try runCommand(Self.keyringCommand, arguments, input: Array(input.utf8), environment: environment(extra))
    }

    /// Runs python with the keyring library; `script` reads its arguments from sys.argv.
    private func python(_ script: String, _ arguments: String..., environment extra: [String: String] = [:]) throws -> CommandResult {
        try runCommand(Self.python, ["-c", script] + arguments, environment: environment(extra))
    }

    func testKeyringListsTheBackendAndChoosesItWithoutDBus() throws {
        let list = try keyring("--list-backends", environment: ["PYTHON_KEYRING_BACKEND": ""])
        XCTAssertEqual(list.status, 0, "\(list)")
        // No session bus in this environment: kc comes before the D-Bus backends, which
        // call themselves viable (libsecret: whenever its library imports) and then fail.
        XCTAssertTrue(list.output.contains("keyring_kc.Keyring (priority: 5.1)"), "\(list)")
        // With another viable backend (libsecret's, where its library is installed) keyring
        // chains them, highest priority first: kc must be the first.
        let chosen = try python("import keyring; k = keyring.get_keyring(); k = k.backends[0] if hasattr(k, 'backends') else k; print(type(k).__module__ + '.' + type(k).__name__)",
                                environment: ["PYTHON_KEYRING_BACKEND": ""])
        XCTAssertEqual(chosen.output, "keyring_kc.Keyring\n", "\(chosen)")
    }

    func testKeyringCommandSetGetAndDelUseTheKernelItem() throws {
        let service = uniqueService()
        // keyring set takes a line from a pipe and drops its newline.
        let set = try keyring("set", service, "alice", input: "pa55 wörd\n")
        XCTAssertEqual(set.status, 0, "\(set)")
        XCTAssertEqual(try kc("get", service, "alice").standardOutput, Array("pa55 wörd".utf8), "the exact bytes in the kernel")
        let get = try keyring("get", service, "alice")
        XCTAssertEqual(get.status, 0, "\(get)")
        XCTAssertEqual(get.output, "pa55 wörd\n")
        try kc("set", service, "bob", input: Array("from kc".utf8))
        XCTAssertEqual(try keyring("get", service, "bob").output, "from kc\n", "an item kc stored")
        XCTAssertEqual(try keyring("del", service, "alice").status, 0)
        XCTAssertEqual(try kc("get", service, "alice").status, 1, "gone from the kernel")
        XCTAssertEqual(try keyring("get", service, "alice").status, 1, "keyring get of a missing password")
    }

    func testAServiceNamedAsTheDockerHelpersIsTheHelpersAndItKeepsOneItemThere() throws {
        // The helpers' services are names, not walls (docs/INTEGRATIONS.md, "Which
        // services each helper uses"): python reaches docker's credential by its name,
        // and docker's next login replaces what python put beside it.
        let sandbox = try HelperSandbox("pydocker")
        defer { sandbox.remove() }
        let server = uniqueService() + ".example"
        let service = "docker:" + server
        servicesToRemove.append(KeyName(service))
        let stored = try sandbox.helper("docker-credential-kc", ["store"], input: #"{"ServerURL":"\#(server)","Username":"alice","Secret":"pw"}"#)
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try keyring("get", service, "alice").output, "pw\n", "python reads the helper's item by its service")
        XCTAssertEqual(try keyring("set", service, "bob", input: "from python\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeys().sorted(), ["alice", "bob"])
        XCTAssertEqual(try sandbox.helper("docker-credential-kc", ["store"], input: #"{"ServerURL":"\#(server)","Username":"alice","Secret":"pw2"}"#).status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["alice"], "the helper keeps one credential per server")
    }

    func testLibraryReadsWritesAndDeletesExactly() throws {
        let service = uniqueService()
        let script = """
            import json, sys, keyring
            from keyring.errors import PasswordDeleteError
            service = sys.argv[1]
            out = {}
            keyring.set_password(service, "ünï", "päss wörd ✓")
            keyring.set_password(service, "multi", "line one\\nline two\\n")
            out["unicode"] = keyring.get_password(service, "ünï")
            out["multi"] = keyring.get_password(service, "multi")
            out["missing"] = keyring.get_password(service, "nobody")
            named = keyring.get_credential(service, "multi")
            out["named"] = [named.username, named.password]
            anyone = keyring.get_credential(service, None)
            out["anyone"] = [anyone.username, anyone.password]
            out["none"] = keyring.get_credential(service + ".absent", None)
            try:
                keyring.delete_password(service, "nobody")
                out["delete missing"] = "no error"
            except PasswordDeleteError as error:
                out["delete missing"] = "PasswordDeleteError"
            keyring.delete_password(service, "ünï")
            out["deleted"] = keyring.get_password(service, "ünï")
            print(json.dumps(out))
            """
        let result = try python(script, service)
        XCTAssertEqual(result.status, 0, "\(result)")
        let out = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(result.standardOutput)) as? [String: Any], "\(result)")
        XCTAssertEqual(out["unicode"] as? String, "päss wörd ✓")
        XCTAssertEqual(out["multi"] as? String, "line one\nline two\n")
        XCTAssertTrue(out["missing"] is NSNull, "a missing password is None: \(out)")
        XCTAssertEqual(out["named"] as? [String], ["multi", "line one\nline two\n"])
        XCTAssertEqual(out["anyone"] as? [String], ["multi", "line one\nline two\n"], "the first username in kc's order")
        XCTAssertTrue(out["none"] is NSNull, "\(out)")
        XCTAssertEqual(out["delete missing"] as? String, "PasswordDeleteError")
        XCTAssertTrue(out["deleted"] is NSNull, "\(out)")
        XCTAssertEqual(try kc("get", service, "multi").standardOutput, Array("line one\nline two\n".utf8), "the same bytes in the kernel")
        XCTAssertEqual(try kc("get", service, "ünï").status, 1)
    }

    func testNamesKcCannotHoldAreEscapedReversibly() throws {
        let service = uniqueService()
        let urlService = "https://pypi.example/\(service)/"
        let escapedURLService = "https:%2F%2Fpypi.example%2F\(service)%2F"
        servicesToRemove.append(KeyName(escapedURLService))
        let script = """
            import sys, keyring
            service, url = sys.argv[1], sys.argv[2]
            for username in ["", ".", "..", "a/b", "100%", "%2F", "nul\\0byte"]:
                keyring.set_password(service, username, "value of " + repr(username))
            keyring.set_password(url, "__token__", "pypi-token")
            for username in ["", ".", "..", "a/b", "100%", "%2F", "nul\\0byte"]:
                assert keyring.get_password(service, username) == "value of " + repr(username), username
            print(keyring.get_password(url, "__token__"))
            """
        let result = try python(script, service, urlService)
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(result.output, "pypi-token\n")
        let listed = try kc("ls", service)
        XCTAssertEqual(Set(listed.output.split(separator: "\n").map(String.init)),
                       ["%", "%2E", "%2E%2E", "a%2Fb", "100%25", "%252F", "nul%00byte"], "\(listed)")
        XCTAssertEqual(try kc("get", "--", escapedURLService, "__token__").output, "pypi-token")
        XCTAssertEqual(try kc("get", service, "a%2Fb").output, "value of 'a/b'")
    }

    func testEmptyAndOverlongAreClearErrors() throws {
        let service = uniqueService()
        let script = """
            import sys, keyring
            from keyring.errors import PasswordSetError
            for username, password in [("empty", ""), ("x" * 300, "v")]:
                try:
                    keyring.set_password(sys.argv[1], username, password)
                    print("stored")
                except PasswordSetError as error:
                    print("PasswordSetError:", error)
            """
        let result = try python(script, service)
        XCTAssertEqual(result.status, 0, "\(result)")
        let lines = result.output.split(separator: "\n")
        XCTAssertEqual(lines.count, 2, "\(result)")
        XCTAssertEqual(lines.first, "stored", "an empty password is kept, as gnome-keyring keeps it: \(result)")
        XCTAssertTrue(lines.last?.contains("kc names are at most 255 bytes") == true, "\(result)")
        XCTAssertEqual(try kc("ls", service).output, "empty\n", "only the empty password was stored")
        XCTAssertEqual(try kc("get", service, "empty").output, "")
    }

    func testAccessPropertyChoosesTheLevel() throws {
        let service = uniqueService()
        let result = try python("import sys, keyring; keyring.set_password(sys.argv[1], 'u', 'v')", service,
                                environment: ["KEYRING_PROPERTY_ACCESS": "after-first-unlock"])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try listedItems(service).first?.access, "after-first-unlock")
    }

    func testAPasswordInALockedVaultRaisesKeyringLocked() throws {
        let vault = try VaultFixture()
        defer { vault.destroy() }
        try vault.create()
        let service = uniqueService()
        XCTAssertEqual(try vault.set(service, "alice", "v").status, 0)
        XCTAssertEqual(try vault.lock().status, 0)
        let script = """
            import sys, keyring
            from keyring.errors import KeyringLocked
            try:
                print(keyring.get_password(sys.argv[1], "alice"))
            except KeyringLocked as error:
                print("KeyringLocked:", error)
            print(keyring.get_password(sys.argv[1], "bob"))
            """
        let result = try python(script, service, environment: ["XDG_DATA_HOME": vault.dataHome])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertTrue(result.output.hasPrefix("KeyringLocked: kc: no item 'alice'"), "\(result)")
        XCTAssertTrue(result.output.contains("run 'kc unlock'"), "\(result)")
        XCTAssertTrue(result.output.hasSuffix("None\n"), "a password the vault does not hold is just missing: \(result)")
    }

    func testNotViableWhereKcIsMissingOrItsKeyringsFail() throws {
        let missing = try keyring("--list-backends", environment: ["KC_BIN": "/nonexistent/kc"])
        XCTAssertEqual(missing.status, 0, "\(missing)")
        XCTAssertFalse(missing.output.contains("keyring_kc"), "\(missing)")
        let failing = Self.folder + "/failing-kc"
        try "#!/bin/sh\necho 'kc: kernel keyrings are unavailable here (seccomp)' >&2\nexit 2\n"
            .write(toFile: failing, atomically: true, encoding: .utf8)
        chmod(failing, 0o755)
        let why = try python("import keyring_kc\ntry:\n    keyring_kc.Keyring.priority\nexcept RuntimeError as e:\n    print(e)",
                             environment: ["KC_BIN": failing])
        XCTAssertEqual(why.output, "kc: kernel keyrings are unavailable here (seccomp)\n", "\(why)")
        let list = try keyring("--list-backends", environment: ["KC_BIN": failing])
        XCTAssertFalse(list.output.contains("keyring_kc"), "\(list)")
        let noPath = try python("import keyring_kc\ntry:\n    keyring_kc.Keyring.priority\nexcept RuntimeError as e:\n    print(e)",
                                environment: ["PATH": "/nonexistent"])
        XCTAssertEqual(noPath.output, "kc is not on PATH (set KC_BIN to its path)\n", "\(noPath)")
    }
}
