import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// docker-credential-kc: the protocol of docker-credential-helpers called directly, then
/// podman as the real client against Debian's docker-registry with htpasswd auth.
final class DockerCredentialTests: KeyringTestCase {
    private var sandbox: HelperSandbox!
    private var registry: BackgroundProcess?
    private var podmanStorageUsed = false

    override func setUpWithError() throws {
        try super.setUpWithError()
        sandbox = try HelperSandbox("docker")
    }

    override func tearDownWithError() throws {
        registry?.stop()
        registry = nil
        if podmanStorageUsed {
            // Rootless podman's storage holds files of its namespace's other uids: only
            // inside the namespace can they be removed.
            _ = try? podman(["unshare", "rm", "-rf", sandbox.root + "/storage", sandbox.root + "/run"])
        }
        sandbox?.remove()
        try super.tearDownWithError()
    }

    private func helper(_ action: String, _ input: String = "") throws -> CommandResult {
        try sandbox.helper("docker-credential-kc", [action], input: input)
    }

    /// A server URL no other test uses; its service is removed at tearDown.
    private func uniqueServer(_ label: String = #function) -> (url: String, service: String) {
        let host = uniqueService(label) + ".example"
        let url = "https://\(host)/v1/"
        let service = "docker:https:%2F%2F\(host)%2Fv1%2F"
        servicesToRemove.append(KeyName(service))
        return (url, service)
    }

    private func storeJSON(_ url: String, _ user: String, _ secret: String) -> String {
        #"{"ServerURL":"\#(url)","Username":"\#(user)","Secret":"\#(secret)"}"#
    }

    // MARK: The protocol

    func testStoreGetListEraseRoundTripThroughTheKeychain() throws {
        let (url, service) = uniqueServer()
        let stored = try helper("store", storeJSON(url, "alice", "s3cret"))
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(stored.output, "")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "s3cret", "one item, named after the user, holding the secret")
        XCTAssertEqual(try kc("get", service, "alice").output, "s3cret")

        let got = try helper("get", url + "\n")
        XCTAssertEqual(got.status, 0, "\(got)")
        XCTAssertEqual(got.output, #"{"ServerURL":"\#(url)","Username":"alice","Secret":"s3cret"}"# + "\n")

        let listed = try helper("list")
        XCTAssertEqual(listed.status, 0, "\(listed)")
        let servers = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(listed.standardOutput)) as? [String: String])
        XCTAssertEqual(servers[url], "alice")

        // Logging in as someone else replaces the server's credential.
        XCTAssertEqual(try helper("store", storeJSON(url, "bob", "b-pw")).status, 0)
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["bob"])

        let erased = try helper("erase", url)
        XCTAssertEqual(erased.status, 0, "\(erased)")
        XCTAssertFalse(try Keychain(service: service).serviceExists())
    }

    func testStoreGetAndEraseTrimTheServerURLAlike() throws {
        let (url, service) = uniqueServer()
        // White space around the URL, as JSON escapes in store and as it is in get and erase.
        let stored = try helper("store", storeJSON(#" \#(url)\n\t"#, "alice", "s3cret"))
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "s3cret", "stored under the trimmed URL's service")
        XCTAssertEqual(try kc("ls").output.split(separator: "\n").filter { $0.contains(service) }, [Substring(service)],
                       "one service, without the white space")
        for asked in [url, "  \(url)\n"] {
            let got = try helper("get", asked)
            XCTAssertEqual(got.status, 0, "\(asked.debugDescription): \(got)")
            XCTAssertEqual(got.output, #"{"ServerURL":"\#(url)","Username":"alice","Secret":"s3cret"}"# + "\n")
        }
        let listed = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(try helper("list").standardOutput)) as? [String: String])
        XCTAssertEqual(listed[url], "alice")
        XCTAssertEqual(try helper("erase", "\t\(url) \n").status, 0)
        XCTAssertFalse(try Keychain(service: service).serviceExists())

        // A URL of white space only is no URL, in store as in get.
        let blank = try helper("store", storeJSON(#" \n "#, "alice", "s3cret"))
        XCTAssertEqual(blank.status, 1, "\(blank)")
        XCTAssertEqual(blank.output, "no credentials server URL\n")
        XCTAssertEqual(try helper("get", " \n ").output, "no credentials server URL\n")
    }

    func testAMissingCredentialIsTheExactTextClientsLookFor() throws {
        let (url, _) = uniqueServer()
        let got = try helper("get", url)
        XCTAssertEqual(got.status, 1)
        XCTAssertEqual(got.output, "credentials not found in native keychain\n", "docker and podman then pull anonymously")
        let erased = try helper("erase", url)
        XCTAssertEqual(erased.status, 1)
        XCTAssertEqual(erased.output, "credentials not found in native keychain\n", "podman logout treats this as already logged out")
    }

    func testSecretsAreEscapedBothWays() throws {
        let (url, service) = uniqueServer()
        let escaped = #"q\"b\\n\nt\tu\u00e9\ud83d\ude00/\/"#
        XCTAssertEqual(try helper("store", storeJSON(url, "a/l%ice", escaped)).status, 0)
        let secret = "q\"b\\n\nt\tu\u{e9}\u{1F600}//"
        XCTAssertEqual(try Keychain(service: service).string(forKey: "a%2Fl%25ice"), secret)
        let got = try helper("get", "  \(url)\n\n")
        let answer = try XCTUnwrap(try JSONSerialization.jsonObject(with: Data(got.standardOutput)) as? [String: String], "\(got)")
        XCTAssertEqual(answer, ["ServerURL": url, "Username": "a/l%ice", "Secret": secret])
    }

    func testBadInputIsRefusedAndLeavesTheStoredCredential() throws {
        let (url, service) = uniqueServer()
        XCTAssertEqual(try helper("store", storeJSON(url, "alice", "kept")).status, 0)
        let inputs = [
            "{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"lost",
            "{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"x\"} trailing",
            "{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":1}",
            "{\"ServerURL\":\"\(url)\",\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"x\"}",
            "{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"a\u{1}b\"}",
            "[1, 2]",
        ]
        for input in inputs {
            let refused = try helper("store", input)
            XCTAssertEqual(refused.status, 1, input)
            XCTAssertTrue(refused.output.hasPrefix("kc: the credentials are not valid JSON ("), "\(input): \(refused)")
            XCTAssertEqual(refused.output.filter { $0 == "\n" }.count, 1, "one line")
        }
        let noServer = try helper("store", #"{"Username":"alice","Secret":"x"}"#)
        XCTAssertEqual(noServer.output, "no credentials server URL\n")
        let noUser = try helper("store", #"{"ServerURL":"\#(url)","Secret":"x","Extra":{"a":[true,null,-1.5e3]}}"#)
        XCTAssertEqual(noUser.output, "no credentials username\n")
        XCTAssertEqual(try helper("get", "   \n").output, "no credentials server URL\n")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "kept", "the stored credential is untouched")

        let unknown = try helper("frobnicate")
        XCTAssertEqual(unknown.status, 1)
        XCTAssertEqual(unknown.output, "Unknown credential action `frobnicate`\n")
        let version = try helper("version")
        XCTAssertEqual(version.status, 0)
        XCTAssertTrue(version.output.hasPrefix("docker-credential-kc (kc) "), "\(version)")
    }

    // MARK: podman with a real registry

    /// podman with its storage, run folder and temporary files in the sandbox, so the
    /// user's images are never touched; vfs works rootless without fuse-overlayfs.
    private func podman(_ arguments: [String], input: String = "", authFile: String? = nil) throws -> CommandResult {
        var environment = sandbox.environment
        environment["TMPDIR"] = sandbox.root + "/tmp"
        environment["REGISTRY_AUTH_FILE"] = authFile
        return try runCommand("/usr/bin/env", ["podman", "--root", sandbox.root + "/storage", "--runroot", sandbox.root + "/run",
                                               "--storage-driver", "vfs", "--cgroup-manager", "cgroupfs", "--events-backend", "none"]
                                  + arguments, input: Array(input.utf8), environment: environment)
    }

    /// Starts docker-registry on 127.0.0.1 with htpasswd auth for `user`; returns HOST:PORT.
    private func startRegistry(user: String, password: String) throws -> String {
        for program in ["docker-registry", "htpasswd", "podman"] where !programExists(program) {
            throw XCTSkip("\(program) is not installed")
        }
        let hashed = try runCommand("/usr/bin/env", ["htpasswd", "-Bci", sandbox.root + "/htpasswd", user], input: Array(password.utf8))
        guard hashed.status == 0 else { throw XCTSkip("htpasswd failed: \(hashed)") }
        let port = try freeLocalPort()
        let config = """
        version: 0.1
        log:
          level: error
          accesslog:
            disabled: true
        storage:
          filesystem:
            rootdirectory: \(sandbox.root)/registry
        http:
          addr: 127.0.0.1:\(port)
          secret: kc-test-\(getpid())
        auth:
          htpasswd:
            realm: kc-test
            path: \(sandbox.root)/htpasswd

        """
        try sandbox.write(config, to: sandbox.root + "/registry.yml")
        registry = try BackgroundProcess("/usr/bin/env", ["docker-registry", "serve", sandbox.root + "/registry.yml"],
                                         environment: sandbox.environment, logPath: sandbox.root + "/registry.log")
        guard waitForListener(port: port) else {
            XCTFail("docker-registry did not start: \(registry?.log ?? "")")
            throw XCTSkip("no registry")
        }
        return "127.0.0.1:\(port)"
    }

    func testListSkipsNamesThatAreNotUTF8AndStaysValidJSON() throws {
        let (url, _) = uniqueServer()
        XCTAssertEqual(try helper("store", storeJSON(url, "alice", "s3cret")).status, 0)
        let badServer = KeyName(bytes: Array("docker:\(uniqueService())-".utf8) + [0xff])
        let badUser = KeyName(bytes: Array("docker:\(uniqueService()).example".utf8))
        servicesToRemove += [badServer, badUser]
        try Keychain(service: badServer).set("x", forKey: "alice")
        try Keychain(service: badUser).set("x", forKey: KeyName(bytes: [0x62, 0xfe]))
        let listed = try helper("list")
        XCTAssertEqual(listed.status, 0, "\(listed)")
        let object = try JSONSerialization.jsonObject(with: Data(listed.output.utf8)) as? [String: String]
        XCTAssertEqual(object?[url], "alice", "\(listed.output)")
    }

    /// The error line goes to the client, which shows it or logs it: it names what is
    /// wrong, never a character of the secret.
    func testAnErrorInTheSecretDoesNotQuoteTheSecret() throws {
        let (url, _) = uniqueServer()
        for secret in [#"hunter\q7"#, #"hunter\Z7"#, #"hunter\%7"#] {
            let refused = try helper("store", "{\"ServerURL\":\"\(url)\",\"Username\":\"alice\",\"Secret\":\"\(secret)\"}")
            XCTAssertEqual(refused.status, 1, "\(refused)")
            XCTAssertTrue(refused.output.hasPrefix("kc: the credentials are not valid JSON ("), "\(refused)")
            XCTAssertFalse(refused.output.contains(String(secret.dropFirst(7).prefix(1))), "\(secret): \(refused.output)")
        }
    }

    func testPodmanLoginPushPullLogoutKeepThePasswordInTheKeychain() throws {
        let server = try startRegistry(user: "alice", password: "registry-s3cret")
        let service = "docker:" + server
        servicesToRemove.append(KeyName(service))
        try FileManager.default.createDirectory(atPath: sandbox.root + "/tmp", withIntermediateDirectories: true)
        let authFile = sandbox.root + "/auth.json"
        try sandbox.write(#"{"credHelpers":{"\#(server)":"kc"}}"#, to: authFile)

        // An image made here, with no network: one small file.
        let files = sandbox.root + "/image"
        try FileManager.default.createDirectory(atPath: files, withIntermediateDirectories: true)
        try sandbox.write("kept in a keychain\n", to: files + "/hello.txt")
        XCTAssertEqual(try runCommand("/bin/tar", ["-C", files, "-cf", sandbox.root + "/image.tar", "hello.txt"]).status, 0)
        let image = "\(server)/kc-test:1"
        podmanStorageUsed = true
        let imported = try podman(["import", "-q", sandbox.root + "/image.tar", image])
        guard imported.status == 0 else { throw XCTSkip("podman cannot import an image here: \(imported.standardError)") }

        let login = try podman(["login", "--tls-verify=false", "-u", "alice", "--password-stdin", server],
                               input: "registry-s3cret\n", authFile: authFile)
        XCTAssertEqual(login.status, 0, "\(login)\nregistry: \(registry?.log ?? "")")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "registry-s3cret", "podman stored through kc")
        let authJSON = try String(contentsOfFile: authFile, encoding: .utf8)
        XCTAssertFalse(authJSON.contains("registry-s3cret") || authJSON.contains("\"auth\""), "no password in \(authJSON)")

        let push = try podman(["push", "-q", "--tls-verify=false", image], authFile: authFile)
        XCTAssertEqual(push.status, 0, "\(push)")
        XCTAssertEqual(try podman(["rmi", image]).status, 0)
        let pull = try podman(["pull", "-q", "--tls-verify=false", image], authFile: authFile)
        XCTAssertEqual(pull.status, 0, "an authenticated pull: \(pull)")

        let logout = try podman(["logout", server], authFile: authFile)
        XCTAssertEqual(logout.status, 0, "\(logout)")
        XCTAssertFalse(try Keychain(service: service).serviceExists(), "podman logout erased the credential")
        XCTAssertEqual(try podman(["rmi", image]).status, 0)
        let refused = try podman(["pull", "-q", "--tls-verify=false", image], authFile: authFile)
        XCTAssertNotEqual(refused.status, 0)
        XCTAssertTrue(refused.standardError.contains("unauthorized"), "an anonymous pull is refused: \(refused)")
    }

    /// docker's CLI logs in on its own when no daemon answers (and through the daemon
    /// when one does); either way the credential goes to its credsStore.
    func testDockerLoginAndLogoutWithCredsStoreKc() throws {
        guard programExists("docker") else { throw XCTSkip("docker's CLI is not installed") }
        let server = try startRegistry(user: "alice", password: "docker-s3cret")
        let service = "docker:" + server
        servicesToRemove.append(KeyName(service))
        let config = sandbox.root + "/docker"
        try FileManager.default.createDirectory(atPath: config, withIntermediateDirectories: true)
        try sandbox.write(#"{"credsStore": "kc"}"#, to: config + "/config.json")
        var environment = sandbox.environment
        environment["DOCKER_CONFIG"] = config
        let login = try runCommand("/usr/bin/env", ["docker", "login", "-u", "alice", "--password-stdin", server],
                                   input: Array("docker-s3cret\n".utf8), environment: environment)
        XCTAssertEqual(login.status, 0, "\(login)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "docker-s3cret")
        let written = try String(contentsOfFile: config + "/config.json", encoding: .utf8)
        XCTAssertFalse(written.contains("docker-s3cret") || written.contains("\"auth\""), "no password in \(written)")

        let logout = try runCommand("/usr/bin/env", ["docker", "logout", server], environment: environment)
        XCTAssertEqual(logout.status, 0, "\(logout)")
        XCTAssertFalse(try Keychain(service: service).serviceExists(), "docker logout erased the credential")
    }
}
