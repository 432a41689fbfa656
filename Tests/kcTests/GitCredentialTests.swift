import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// git-credential-kc with real git: `git credential` round trips, the helper's protocol
/// directly (for what git 2.39 does not pass on yet: expiry, refresh tokens), and a
/// `git clone` over HTTP with basic auth that stores, reuses and erases the password.
final class GitCredentialTests: KeyringTestCase {
    private var sandbox: HelperSandbox!
    private var server: BackgroundProcess?

    override func setUpWithError() throws {
        try super.setUpWithError()
        guard programExists("git") else { throw XCTSkip("git is not installed") }
        sandbox = try HelperSandbox("git")
        try sandbox.write("[credential]\n\thelper = kc\n[user]\n\tname = kc test\n\temail = kc@example.com\n",
                          to: sandbox.home + "/.gitconfig")
    }

    override func tearDownWithError() throws {
        server?.stop()
        server = nil
        sandbox?.remove()
        try super.tearDownWithError()
    }

    /// A host no other test uses, and its `git:https:HOST` service, removed at tearDown.
    private func uniqueHost(_ label: String = #function) -> (host: String, service: String) {
        let host = uniqueService(label).replacingOccurrences(of: ".", with: "-") + ".example"
        let service = "git:https:" + host
        servicesToRemove.append(KeyName(service))
        return (host, service)
    }

    private func git(_ arguments: [String], input: String = "", environment extra: [String: String] = [:]) throws -> CommandResult {
        try runCommand("/usr/bin/env", ["git"] + arguments, input: Array(input.utf8),
                       environment: sandbox.environment.merging(extra) { $1 })
    }

    private func helper(_ action: String, _ input: String) throws -> CommandResult {
        try sandbox.helper("git-credential-kc", [action], input: input)
    }

    // MARK: git credential

    func testGitCredentialApproveFillRejectGoThroughTheKeychain() throws {
        let (host, service) = uniqueHost()
        let approve = try git(["credential", "approve"], input: "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\n\n")
        XCTAssertEqual(approve.status, 0, "\(approve)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "s3cret", "one item per user, holding the password")
        XCTAssertEqual(try kc("get", service, "alice").output, "s3cret", "kc get reads what git stored")

        let fill = try git(["credential", "fill"], input: "protocol=https\nhost=\(host)\n\n")
        XCTAssertEqual(fill.status, 0, "\(fill)")
        XCTAssertEqual(fill.output, "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\n")

        let reject = try git(["credential", "reject"], input: "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\n\n")
        XCTAssertEqual(reject.status, 0, "\(reject)")
        XCTAssertNil(try Keychain(service: service).string(forKey: "alice"))
        XCTAssertFalse(try Keychain(service: service).serviceExists(), "erasing the last credential removes the service")
    }

    /// `credential.helper = kc --access after-first-unlock`: git passes the helper's own
    /// arguments before the action, and the credential goes to that level (the user
    /// keyring, which every session of the user sees); get and erase find it there.
    func testAccessOptionChoosesTheLevelNewCredentialsGoTo() throws {
        let (host, service) = uniqueHost()
        // An empty helper first clears the sandbox's own `credential.helper kc`.
        let helpers = ["-c", "credential.helper=", "-c", "credential.helper=kc --access after-first-unlock"]
        let approve = try git(helpers + ["credential", "approve"], input: "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\n\n")
        XCTAssertEqual(approve.status, 0, "\(approve)")
        XCTAssertEqual(try Keychain(service: service).item("alice")?.accessibility, .afterFirstUnlock)
        let fill = try git(helpers + ["credential", "fill"], input: "url=https://\(host)\n\n")
        XCTAssertEqual(fill.output, "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\n", "\(fill)")
        XCTAssertEqual(try git(helpers + ["credential", "reject"], input: "url=https://alice:s3cret@\(host)\n\n").status, 0)
        XCTAssertNil(try Keychain(service: service).string(forKey: "alice"))

        let wrong = try sandbox.helper("git-credential-kc", ["--access", "forever", "store"],
                                       input: "protocol=https\nhost=\(host)\nusername=alice\npassword=x\n\n")
        XCTAssertEqual(wrong.status, 64, "\(wrong)")
        XCTAssertEqual(wrong.standardError, "kc: git-credential-kc: --access takes when-unlocked, after-first-unlock or always (got 'forever')\n")
        let extra = try sandbox.helper("git-credential-kc", ["--access", "always"], input: "")
        XCTAssertEqual(extra.status, 64, "\(extra)")
        XCTAssertNil(try Keychain(service: service).string(forKey: "alice"), "nothing stored by a wrong command line")
    }

    func testUseHttpPathKeepsOneCredentialPerRepository() throws {
        let (host, _) = uniqueHost()
        let service = "git:https:\(host)%2Fteam%2Frepo.git"
        servicesToRemove.append(KeyName(service))
        let approve = try git(["-c", "credential.useHttpPath=true", "credential", "approve"],
                              input: "url=https://bob@\(host)/team/repo.git\npassword=p%/w\n\n")
        XCTAssertEqual(approve.status, 0, "\(approve)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "bob"), "p%/w")
        XCTAssertNil(try Keychain(service: "git:https:" + host).string(forKey: "bob"), "not stored for the whole host")
        let fill = try git(["-c", "credential.useHttpPath=true", "credential", "fill"], input: "url=https://\(host)/team/repo.git\n\n")
        XCTAssertEqual(fill.output, "protocol=https\nhost=\(host)\npath=team/repo.git\nusername=bob\npassword=p%/w\n", "\(fill)")
    }

    func testAUserNameWithASlashIsStoredExactly() throws {
        let (host, service) = uniqueHost()
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=team/al%ice\npassword=pw\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "team%2Fal%25ice"), "pw")
        let got = try helper("get", "protocol=https\nhost=\(host)\n")
        XCTAssertEqual(got.output, "username=team/al%ice\npassword=pw\n", "\(got)")
    }

    // MARK: The protocol directly

    func testAHostWithASlashDoesNotReadTheCredentialOfAHostWithAPath() throws {
        let (host, _) = uniqueHost()
        let service = "git:https:\(host)%2Fteam"
        servicesToRemove.append(KeyName(service))
        let stored = try helper("store", "protocol=https\nhost=\(host)\npath=team\nusername=alice\npassword=s3cret\n")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "s3cret")
        // A `%2F` in a URL's host decodes to `/`; that host is another remote.
        for input in ["protocol=https\nhost=\(host)/team\n", "url=https://\(host)%2Fteam\n", "protocol=https\nhost=\(host)/team\nusername=alice\n"] {
            let got = try helper("get", input)
            XCTAssertEqual(got.status, 0, "\(got)")
            XCTAssertEqual(got.output, "", "no credential for \(input)")
        }
        XCTAssertEqual(try helper("erase", "protocol=https\nhost=\(host)/team\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "s3cret", "erase of the other remote leaves it")
    }

    /// A script that pipes `url=$URL` to the helper sends the answer where git would:
    /// the helper must split the URL as git does, or it answers for another host.
    func testAURLIsSplitAsGitSplitsIt() throws {
        let (host, service) = uniqueHost()
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=evil.test?\npassword=victim-pw\n").status, 0)
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=u@evil.test\npassword=victim-pw2\n").status, 0)
        XCTAssertNotNil(try Keychain(service: service).string(forKey: "evil.test?"))
        // git: host evil.test (the host ends at `?`), and host `evil.test@HOST` (the
        // user ends at the first `@`); neither is this host.
        for url in ["https://evil.test?@\(host)", "https://evil.test#@\(host)", "https://u@evil.test@\(host)"] {
            let got = try helper("get", "url=\(url)\n")
            XCTAssertFalse(got.output.contains("victim-pw"), "\(url) answered \(got)")
            let fill = try git(["credential", "fill"], input: "url=\(url)\n\n", environment: ["GIT_ASKPASS": "/bin/false"])
            XCTAssertFalse(fill.output.contains("host=\(host)\n"), "git sends \(url) elsewhere: \(fill)")
        }
        let got = try helper("get", "url=https://\(host)/?x\n")
        XCTAssertEqual(got.status, 0, "\(got)")
    }

    func testPasswordExpiryBecomesTheKernelTimeout() throws {
        let (host, service) = uniqueHost()
        let expiry = Int(Date().timeIntervalSince1970) + 3600
        let stored = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=s3cret\npassword_expiry_utc=\(expiry)\n\n")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        let item = try XCTUnwrap(try Keychain(service: service).item("alice"))
        XCTAssertEqual(item.deadline?.secondsSinceEpoch, Int64(expiry), "the kernel expires the password when git says it expires")
        let listed = try kc("ls", "--long", service)
        // 1h, or 59m once a second has passed since the store (a slow machine).
        XCTAssertTrue(listed.output.contains("alice\twhen-unlocked\t6\t1h\t") || listed.output.contains("alice\twhen-unlocked\t6\t59m\t"),
                      "\(listed)")
        let got = try helper("get", "protocol=https\nhost=\(host)\nusername=alice\n")
        XCTAssertEqual(got.output, "username=alice\npassword=s3cret\npassword_expiry_utc=\(expiry)\n")
    }

    func testAnAlreadyExpiredPasswordIsNotStored() throws {
        let (host, service) = uniqueHost()
        let past = Int(Date().timeIntervalSince1970) - 10
        let stored = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=old\npassword_expiry_utc=\(past)\n")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertFalse(try Keychain(service: service).serviceExists())
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\n").output, "")
    }

    /// An empty `password=` is a password, as git's own store helper keeps it: stored
    /// as an empty item, and given back by `get`.
    func testAnEmptyPasswordIsStoredAndGivenBack() throws {
        let (host, service) = uniqueHost()
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).data(forKey: "alice"), [])
        let got = try helper("get", "protocol=https\nhost=\(host)\n")
        XCTAssertEqual(got.status, 0, "\(got)")
        XCTAssertTrue(got.output.contains("username=alice\npassword=\n"), "\(got)")
        _ = try Keychain(service: service).removeAll()
    }

    func testAnExpiryBeyondTheKernelsReachIsRefusedOnStandardErrorAndKeepsTheStoredPassword() throws {
        let (host, service) = uniqueHost()
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=kept\n").status, 0)
        // Milliseconds where git means seconds: about 57,000 years from now.
        let milliseconds = Int64(Date().timeIntervalSince1970) * 1000
        let refused = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=new\npassword_expiry_utc=\(milliseconds)\n")
        XCTAssertEqual(refused.status, 2, "\(refused)")
        XCTAssertEqual(refused.standardOutput, [], "git reads nothing from a store")
        XCTAssertEqual(refused.standardError,
                       "kc: git-credential-kc: not stored: password_expiry_utc \(milliseconds) is more than 4294967295 seconds (136 years) from now, beyond what the kernel can keep; it should be seconds since 1970 (is it in milliseconds?)\n")
        let item = try XCTUnwrap(try Keychain(service: service).item("alice"))
        XCTAssertNil(item.deadline, "the stored password is as it was")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "kept")
        // git shows a helper's refusal on its standard error and carries on. (git 2.39 does
        // not pass password_expiry_utc on; a password too long for the kernel stands in.)
        let approved = try git(["credential", "approve"],
                               input: "protocol=https\nhost=\(host)\nusername=alice\npassword=\(String(repeating: "x", count: 40000))\n")
        XCTAssertEqual(approved.status, 0, "\(approved)")
        XCTAssertTrue(approved.standardError.contains("kc: git-credential-kc: value too large: 40000 bytes"), "\(approved)")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "kept")

        // The furthest the kernel reaches is stored, with that deadline.
        let furthest = Int64(Date().timeIntervalSince1970) + Int64(UInt32.max) - 60
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=far\npassword_expiry_utc=\(furthest)\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).item("alice")?.deadline?.secondsSinceEpoch, furthest)
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\nusername=alice\n").output,
                       "username=alice\npassword=far\npassword_expiry_utc=\(furthest)\n")
    }

    func testTheOAuthRefreshTokenIsKeptBesideThePasswordAndOutlivesIt() throws {
        let (host, service) = uniqueHost()
        let expiry = Int(Date().timeIntervalSince1970) + 2
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=access\npassword_expiry_utc=\(expiry)\noauth_refresh_token=refresh\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice%oauth_refresh_token"), "refresh")
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\n").output,
                       "username=alice\npassword=access\npassword_expiry_utc=\(expiry)\noauth_refresh_token=refresh\n")
        // Once the access token expires, git still gets the refresh token to renew it.
        sleep(4)
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\n").output, "username=alice\noauth_refresh_token=refresh\n")
        // A new password without a refresh token leaves none behind.
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=plain\n").status, 0)
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\n").output, "username=alice\npassword=plain\n")
    }

    func testGetWithoutAUserNameAnswersWithTheUserStoredLast() throws {
        let (host, _) = uniqueHost()
        for (user, password) in [("alice", "a-pw"), ("bob", "b-pw"), ("carol", "c-pw"), ("bob", "b-pw2")] {
            XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=\(user)\npassword=\(password)\n").status, 0)
        }
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\n").output, "username=bob\npassword=b-pw2\n")
        XCTAssertEqual(try helper("get", "protocol=https\nhost=\(host)\nusername=alice\n").output, "username=alice\npassword=a-pw\n")
        XCTAssertEqual(try helper("get", "protocol=http\nhost=\(host)\n").output, "", "another protocol is another remote")
    }

    func testEraseRemovesOnlyACredentialWithThePasswordGitSends() throws {
        let (host, service) = uniqueHost()
        XCTAssertEqual(try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=new\n").status, 0)
        XCTAssertEqual(try helper("erase", "protocol=https\nhost=\(host)\nusername=alice\npassword=old\n").status, 0)
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "new", "a stale rejection leaves the newer password")
        XCTAssertEqual(try helper("erase", "protocol=https\nhost=\(host)\nusername=alice\npassword=new\n").status, 0)
        XCTAssertNil(try Keychain(service: service).string(forKey: "alice"))
    }

    func testBadInputIsRefusedWithOneLineAndStoresNothing() throws {
        let (host, service) = uniqueHost()
        let withNUL = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=a\u{0}b\n")
        XCTAssertEqual(withNUL.status, 2)
        XCTAssertEqual(withNUL.standardError, "kc: git-credential-kc: line 4 holds a NUL byte; git never sends one\n")
        let notKeyValue = try helper("store", "protocol=https\nhost=\(host)\nusername alice\n")
        XCTAssertEqual(notKeyValue.status, 2)
        XCTAssertEqual(notKeyValue.standardError, "kc: git-credential-kc: line 3 is not key=value\n")
        // (Through a shell: the helper stops reading, and the writer must not be this process.)
        let huge = try runCommand("/bin/sh", ["-c", "{ printf 'protocol=https\\nhost=\(host)\\nusername=alice\\npassword='; head -c 70000 /dev/zero | tr '\\0' x; } | git-credential-kc store"],
                                  environment: sandbox.environment)
        XCTAssertEqual(huge.status, 2)
        XCTAssertTrue(huge.standardError.hasPrefix("kc: git-credential-kc: the input is over 65536 bytes"), "\(huge)")
        let tooLongForTheKernel = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=" + String(repeating: "x", count: 40000) + "\n")
        XCTAssertEqual(tooLongForTheKernel.status, 2)
        XCTAssertTrue(tooLongForTheKernel.standardError.hasPrefix("kc: git-credential-kc: "), "\(tooLongForTheKernel)")
        XCTAssertFalse(try Keychain(service: service).serviceExists(), "nothing was stored")

        let unknown = try helper("frobnicate", "")
        XCTAssertEqual(unknown.status, 0, "git requires unknown actions to be ignored")
        XCTAssertEqual(unknown.output + unknown.standardError, "")
        let usage = try sandbox.helper("git-credential-kc", [], input: "")
        XCTAssertEqual(usage.status, 64)
        XCTAssertTrue(usage.standardError.hasPrefix("kc: usage: git-credential-kc [--access LEVEL] get|store|erase"), "\(usage)")
    }

    func testInputAfterTheBlankLineIsNotRead() throws {
        let (host, service) = uniqueHost()
        let stored = try helper("store", "protocol=https\nhost=\(host)\nusername=alice\npassword=pw\n\nusername=mallory\n")
        XCTAssertEqual(stored.status, 0, "\(stored)")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["%latest", "alice"])
    }

    // MARK: A real clone

    /// A git server over HTTP with basic auth: python's http.server checks the
    /// Authorization header and runs git http-backend as a CGI program for each request.
    private static let serverScript = #"""
    import base64, hmac, os, subprocess, sys
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    EXPECTED = "Basic " + base64.b64encode((os.environ["KC_TEST_USER"] + ":" + os.environ["KC_TEST_PASSWORD"]).encode()).decode()

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self): self.serve()
        def do_POST(self): self.serve()

        def serve(self):
            given = self.headers.get("Authorization", "")
            if not hmac.compare_digest(given.encode(), EXPECTED.encode()):
                sys.stderr.write("401 %s %s\n" % (self.path, "with credentials" if given else "anonymous"))
                self.send_response(401)
                self.send_header("WWW-Authenticate", 'Basic realm="kc-test"')
                self.send_header("Content-Length", "0")
                self.end_headers()
                return
            body = b""
            if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                while True:
                    size = int(self.rfile.readline().split(b";")[0], 16)
                    chunk = self.rfile.read(size)
                    self.rfile.readline()
                    if size == 0:
                        break
                    body += chunk
            else:
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            path, _, query = self.path.partition("?")
            env = {
                "GATEWAY_INTERFACE": "CGI/1.1", "SERVER_PROTOCOL": "HTTP/1.1", "SERVER_SOFTWARE": "kc-test",
                "REQUEST_METHOD": self.command, "PATH_INFO": path, "QUERY_STRING": query,
                "CONTENT_TYPE": self.headers.get("Content-Type", ""), "CONTENT_LENGTH": str(len(body)),
                "HTTP_CONTENT_ENCODING": self.headers.get("Content-Encoding", ""),
                "GIT_PROTOCOL": self.headers.get("Git-Protocol", ""),
                "REMOTE_USER": os.environ["KC_TEST_USER"], "REMOTE_ADDR": self.client_address[0],
                "GIT_PROJECT_ROOT": os.environ["KC_TEST_ROOT"], "GIT_HTTP_EXPORT_ALL": "1",
                "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
            }
            done = subprocess.run(["/usr/lib/git-core/git-http-backend"], input=body, env=env, capture_output=True)
            head, _, content = done.stdout.partition(b"\r\n\r\n")
            if not _:
                head, _, content = done.stdout.partition(b"\n\n")
            status, headers = 200, []
            for line in head.decode("latin-1").splitlines():
                name, _, value = line.partition(":")
                if name.lower() == "status":
                    status = int(value.split()[0])
                else:
                    headers.append((name, value.strip()))
            sys.stderr.write("%d %s\n" % (status, self.path))
            self.send_response(status)
            for name, value in headers:
                self.send_header(name, value)
            self.send_header("Content-Length", str(len(content)))
            self.end_headers()
            self.wfile.write(content)

        def log_message(self, *args):
            pass

    ThreadingHTTPServer(("127.0.0.1", int(sys.argv[1])), Handler).serve_forever()
    """#

    /// Serves a bare repository holding one commit; returns its clone URL.
    private func startGitServer(user: String, password: String) throws -> String {
        guard programExists("python3") else { throw XCTSkip("python3 is not installed") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/lib/git-core/git-http-backend") else {
            throw XCTSkip("git http-backend is not at /usr/lib/git-core/git-http-backend")
        }
        let repositories = sandbox.root + "/srv"
        let source = sandbox.root + "/source"
        for step in [["init", "-q", "--bare", repositories + "/repo.git"],
                     ["init", "-q", "-b", "main", source]] {
            let done = try git(step)
            XCTAssertEqual(done.status, 0, "\(done)")
        }
        try sandbox.write("kept in a keychain\n", to: source + "/README")
        for step in [["-C", source, "add", "README"], ["-C", source, "commit", "-q", "-m", "first"],
                     ["-C", source, "push", "-q", repositories + "/repo.git", "main"],
                     ["-C", repositories + "/repo.git", "symbolic-ref", "HEAD", "refs/heads/main"]] {
            let done = try git(step)
            XCTAssertEqual(done.status, 0, "\(done)")
        }
        try sandbox.write(Self.serverScript, to: sandbox.root + "/server.py")
        let port = try freeLocalPort()
        var environment = sandbox.environment
        environment["KC_TEST_USER"] = user
        environment["KC_TEST_PASSWORD"] = password
        environment["KC_TEST_ROOT"] = repositories
        server = try BackgroundProcess("/usr/bin/env", ["python3", sandbox.root + "/server.py", String(port)],
                                       environment: environment, logPath: sandbox.root + "/server.log")
        guard waitForListener(port: port) else {
            XCTFail("the git server did not start: \(server?.log ?? "")")
            throw XCTSkip("no git server")
        }
        return "http://127.0.0.1:\(port)/repo.git"
    }

    /// An askpass program that answers git's prompts, or with `answer` nil refuses
    /// them; either way it notes each prompt in `log`.
    private func askpass(_ name: String, user: String, answer: String?, log: String) throws -> String {
        let path = sandbox.root + "/" + name
        let reply = answer.map { "case \"$1\" in Username*) echo \(user);; *) echo '\($0)';; esac" } ?? "exit 1"
        try sandbox.write("#!/bin/sh\necho \"$1\" >> '\(log)'\n\(reply)\n", to: path, executable: true)
        return path
    }

    func testGitCloneStoresTheTypedPasswordReusesItAndErasesAWrongOne() throws {
        let url = try startGitServer(user: "alice", password: "clone-s3cret")
        let service = "git:http:" + url.dropFirst("http://".count).prefix { $0 != "/" }
        servicesToRemove.append(KeyName(service))
        let prompts = sandbox.root + "/prompts.log"
        let answering = try askpass("askpass-answer", user: "alice", answer: "clone-s3cret", log: prompts)
        let refusing = try askpass("askpass-refuse", user: "alice", answer: nil, log: prompts)

        // First clone: git asks (askpass), then approves, and the helper stores it.
        let first = try git(["clone", "-q", url, sandbox.root + "/first"], environment: ["GIT_ASKPASS": answering])
        XCTAssertEqual(first.status, 0, "\(first)\nserver: \(server?.log ?? "")")
        XCTAssertEqual(try String(contentsOfFile: sandbox.root + "/first/README", encoding: .utf8), "kept in a keychain\n")
        XCTAssertEqual(try String(contentsOfFile: prompts, encoding: .utf8).split(separator: "\n").count, 2, "asked for user and password once")
        XCTAssertEqual(try Keychain(service: service).string(forKey: "alice"), "clone-s3cret", "git stored the password through kc")

        // Second clone: the keychain answers, nothing is asked.
        try FileManager.default.removeItem(atPath: prompts)
        let second = try git(["clone", "-q", url, sandbox.root + "/second"], environment: ["GIT_ASKPASS": refusing])
        XCTAssertEqual(second.status, 0, "\(second)\nserver: \(server?.log ?? "")")
        XCTAssertFalse(FileManager.default.fileExists(atPath: prompts), "git did not need to ask")

        // A wrong stored password: the server refuses it, git erases it, then asks (and is refused).
        try Keychain(service: service).set("wrong", forKey: "alice")
        let third = try git(["clone", "-q", url, sandbox.root + "/third"], environment: ["GIT_ASKPASS": refusing])
        XCTAssertNotEqual(third.status, 0, "\(third)")
        XCTAssertNil(try Keychain(service: service).string(forKey: "alice"), "git erased the password the server refused")
        XCTAssertTrue(server?.log.contains("401 /repo.git/info/refs?service=git-upload-pack with credentials") ?? false, server?.log ?? "")
    }
}
