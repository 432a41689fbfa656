import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc as OpenBao's agent (issue 38), against a real OpenBao dev server on 127.0.0.1:
/// AppRole credentials kept in kc, the token kept in kc with its TTL, KV v2 secrets
/// mirrored whole into services every door reads, leased secrets that the kernel drops
/// when the lease ends, and the clear errors for what a user gets wrong.
final class OpenBaoAgentTests: OpenBaoTestCase {
    nonisolated(unsafe) private static var shared: OpenBaoLab?
    nonisolated(unsafe) private static var sharedProblem: Error?

    /// One dev server for the class: each test uses secrets and services of its own.
    private func lab() throws -> OpenBaoLab {
        if let lab = Self.shared { return lab }
        if let problem = Self.sharedProblem { throw problem }
        do {
            Self.shared = try OpenBaoLab("dev")
            return Self.shared!
        } catch {
            Self.sharedProblem = error
            throw error
        }
    }

    override class func tearDown() {
        shared?.stop()
        shared = nil
        super.tearDown()
    }

    func testSyncLogsInWithTheAppRoleKcHoldsKeepsTheTokenWithItsTTLAndMirrorsTheSecret() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "token=s3cr3t", "db.password=hunter2")
        let service = uniqueService("app")
        let auth = uniqueService("auth")
        let path = try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]]))

        // No credentials yet: the agent says which items to store, and stores nothing.
        let waiting = try agent(["sync", path])
        XCTAssertEqual(waiting.status, 1, "\(waiting)")
        XCTAssertTrue(waiting.standardError.contains("kc set \(auth) role_id"), waiting.standardError)
        XCTAssertFalse(try Keychain(service: service).serviceExists())

        let keychain = try Keychain(service: auth).accessibility(.afterFirstUnlock)
        try keychain.set(lab["ROLE_ID"], forKey: "role_id")
        try keychain.set(lab["SECRET_ID"], forKey: "secret_id")
        let synced = try agent(["sync", path])
        XCTAssertEqual(synced.status, 0, "\(synced)")
        XCTAssertFalse(synced.standardError.contains(lab["SECRET_ID"]), "no secret in the log")
        XCTAssertEqual(try value(service, "token"), "s3cr3t")
        XCTAssertEqual(try value(service, "db.password"), "hunter2")

        // The token: a kc item at the auth service's level, with the TTL (the lab's role
        // gives 1h by default) as its deadline; OpenBao accepts it.
        let token = try XCTUnwrap(try value(auth, "token"))
        let deadline = try XCTUnwrap(try keychain.deadline(forKey: "token"), "the token has its TTL as deadline")
        XCTAssertGreaterThan(deadline.secondsLeft, 60)
        let lookup = try runCommand(lab.bao, ["token", "lookup", "-format=json"],
                                    environment: ["BAO_ADDR": lab.address, "BAO_TOKEN": token, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(lookup.status, 0, "\(lookup)")
        XCTAssertTrue(lookup.output.contains("kc-agent"), "the token carries the role's policy: \(lookup.output)")

        // Every door reads the mirrored items: kc get, kc exec.
        XCTAssertEqual(try kc("get", service, "token").output, "s3cr3t")
        let exec = try kc("exec", "--service", service, "--env", "--", "/bin/sh", "-c", "printf %s \"$DB_PASSWORD\"")
        XCTAssertEqual(exec.output, "hunter2", "\(exec)")

        // A second sync reuses the stored token rather than logging in again.
        let again = try agent(["sync", path])
        XCTAssertEqual(again.status, 0, "\(again)")
        XCTAssertFalse(again.standardError.contains("logged in"), again.standardError)
        XCTAssertEqual(try value(auth, "token"), token)
    }

    /// Two keys that differ only in their Unicode normalization are two keys in OpenBao
    /// (Go compares bytes) and become two items, each with its own value: none is lost.
    func testKeysThatDifferOnlyInNormalizationAreTwoItems() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        let composed = "caf\u{e9}", decomposed = "cafe\u{301}"
        try lab.mustBao("kv", "put", secret, "\(composed)=one", "\(decomposed)=two")
        let service = uniqueService("normalized")
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab), ["kv": [["secret": secret, "service": service]]]))
        let synced = try agent(["sync", path])
        XCTAssertEqual(synced.status, 0, "\(synced)")
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.allKeyNames().map(\.bytes), [Array(decomposed.utf8), Array(composed.utf8)])
        XCTAssertEqual(try keychain.data(forKey: KeyName(bytes: Array(composed.utf8))), Array("one".utf8))
        XCTAssertEqual(try keychain.data(forKey: KeyName(bytes: Array(decomposed.utf8))), Array("two".utf8))
    }

    func testAChangeReachesTheMountAndADeletedKeyOrSecretGoesToo() throws {
        let lab = try lab()
        let mount = try MountFixture()
        defer { mount.unmount() }
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "a=1", "b=1")
        let service = uniqueService("mirror")
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab),
                                          ["kv": [["secret": secret, "service": service]], "poll_interval": "100ms"]))
        let agent = try AgentProcess(config: path)
        defer { agent.stop() }
        func cat(_ key: String) -> String? { try? String(contentsOfFile: mount.file(service, key), encoding: .utf8) }

        XCTAssertTrue(waitUntil(seconds: 30) { cat("a") == "1" }, agent.log)
        for version in 2...6 {
            try lab.mustBao("kv", "put", secret, "a=\(version)", "b=\(version)")
            XCTAssertTrue(waitUntil(seconds: 10) { cat("a") == "\(version)" && cat("b") == "\(version)" }, "version \(version): \(agent.log)")
        }
        // A key removed in OpenBao (a new version without it) goes from the mount.
        try lab.mustBao("kv", "put", secret, "a=7")
        XCTAssertTrue(waitUntil(seconds: 10) { cat("a") == "7" && !FileManager.default.fileExists(atPath: mount.file(service, "b")) }, agent.log)
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["a"])
        // `kv patch` changes one key and keeps the other.
        try lab.mustBao("kv", "patch", secret, "c=8")
        XCTAssertTrue(waitUntil(seconds: 10) { cat("c") == "8" && cat("a") == "7" }, agent.log)
        // The whole secret deleted: the service goes; written again, it comes back.
        try lab.mustBao("kv", "delete", secret)
        XCTAssertTrue(waitUntil(seconds: 10) { !FileManager.default.fileExists(atPath: mount.file(service)) }, agent.log)
        XCTAssertFalse(try Keychain(service: service).serviceExists())
        try lab.mustBao("kv", "put", secret, "a=9")
        XCTAssertTrue(waitUntil(seconds: 10) { cat("a") == "9" }, agent.log)
        try lab.mustBao("kv", "metadata", "delete", secret)
        XCTAssertTrue(waitUntil(seconds: 10) { (try? Keychain(service: service).serviceExists()) == false }, agent.log)
        XCTAssertTrue(agent.process.isRunning, agent.log)
    }

    /// A mirrored service bound read-only into a podman container (README: containers):
    /// the container reads OpenBao's value, and the next version after a sync.
    func testAMirroredSecretReachesAPodmanContainer() throws {
        let lab = try lab()
        let rootfs = try Podman.rootfs()
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "api-token=first")
        let service = uniqueService("podman")
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab), ["kv": [["secret": secret, "service": service]]]))
        XCTAssertEqual(try agent(["sync", path]).status, 0)
        let mount = try MountFixture(options: ["--read-only", "--service", service], inPodmanNamespace: Podman.isRootless)
        defer { mount.unmount() }
        let script = "cat /run/secrets/api-token"
        var run = try Podman.run(["/bin/sh", "-c", script], options: ["-v", "\(mount.path):/run/secrets:ro"], rootfs: rootfs)
        XCTAssertEqual(run.status, 0, "\(run)")
        XCTAssertEqual(run.output, "first")
        try lab.mustBao("kv", "put", secret, "api-token=second")
        XCTAssertEqual(try agent(["sync", path]).status, 0)
        run = try Podman.run(["/bin/sh", "-c", script], options: ["-v", "\(mount.path):/run/secrets:ro"], rootfs: rootfs)
        XCTAssertEqual(run.output, "second", "\(run)")
    }

    /// The agent replaces a service's items as one set: a reader that takes the set
    /// (kc exec, `Keychain.allValues`) sees every key of one version, never some of the
    /// next, however the writes and reads interleave.
    func testAVersionIsNeverMixedWithTheNext() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        let keys = (0..<6).map { "k\($0)" }
        try lab.mustBao(["kv", "put", secret] + keys.map { "\($0)=v0" })
        let service = uniqueService("set")
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab),
                                          ["kv": [["secret": secret, "service": service]], "poll_interval": "50ms"]))
        let agent = try AgentProcess(config: path)
        defer { agent.stop() }
        let keychain = try Keychain(service: service)
        XCTAssertTrue(waitUntil(seconds: 30) { (try? keychain.string(forKey: "k0")) == "v0" }, agent.log)

        let done = LockedFlag()
        let writer = Thread {
            for version in 1...25 {
                _ = try? lab.bao(["kv", "put", secret] + keys.map { "\($0)=v\(version)" })
            }
            done.set()
        }
        writer.start()
        var reads = 0, mixed: [String] = []
        var versionsSeen = Swift.Set<String>()
        while !done.isSet || reads < 50 {
            let values = try keychain.allValues()
            reads += 1
            let distinct = Swift.Set(values.map { String(decoding: $0.value, as: UTF8.self) })
            if values.count != keys.count || distinct.count != 1 { mixed.append("\(values.map { "\($0.key)=\(String(decoding: $0.value, as: UTF8.self))" })") }
            versionsSeen.formUnion(distinct)
            if reads % 20 == 0 {
                let exec = try kc("exec", "--service", service, "--env", "--", "/bin/sh", "-c", "echo $K0 $K1 $K2 $K3 $K4 $K5")
                let words = Swift.Set(exec.output.split(whereSeparator: \.isWhitespace))
                if exec.status != 0 || words.count != 1 { mixed.append("kc exec: \(exec)") }
            }
        }
        XCTAssertEqual(mixed, [], "a reader saw a set mixed from two versions")
        XCTAssertTrue(waitUntil(seconds: 10) { (try? keychain.string(forKey: "k5")) == "v25" }, agent.log)
        XCTAssertGreaterThan(versionsSeen.count, 3, "the reads overlapped the writes: \(versionsSeen.sorted())")
    }

    /// A PKI certificate is a leased secret: its key and certificate are stored as one
    /// set with the lease's end as their deadline, re-issued before it ends while the
    /// agent runs, and gone by the kernel's own expiry when it does not.
    func testALeasedCertificateEndsWithItsLeaseByTheKernelsExpiry() throws {
        let lab = try lab()
        let service = uniqueService("tls")
        let lease: [String: Any] = ["path": "pki/issue/web", "service": service,
                                    "data": ["common_name": "app.example.test", "ttl": "6s"]]
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab), ["leases": [lease]]))
        let synced = try agent(["sync", path])
        XCTAssertEqual(synced.status, 0, "\(synced)")
        let keychain = try Keychain(service: service)
        let certificate = try XCTUnwrap(try keychain.string(forKey: "certificate"))
        XCTAssertTrue(certificate.hasPrefix("-----BEGIN CERTIFICATE-----"), certificate)
        XCTAssertNotNil(try keychain.string(forKey: "private_key"))
        XCTAssertTrue(try keychain.allKeys().contains("issuing_ca"))
        let deadline = try XCTUnwrap(try keychain.deadline(forKey: "private_key"), "the lease's end is the item's deadline")
        XCTAssertLessThanOrEqual(deadline.secondsLeft, 7)
        XCTAssertEqual(try keychain.deadline(forKey: "certificate"), deadline, "key and certificate end together")
        try assertKeyMatchesCertificate(keychain)

        // Nobody renews it (the agent ran once): the kernel drops both when the lease ends.
        XCTAssertTrue(waitUntil(seconds: 15) { (try? keychain.string(forKey: "private_key")) == nil })
        XCTAssertNil(try keychain.string(forKey: "certificate"))

        // Running, the agent issues a new certificate before the old one's lease ends:
        // the items never go missing, and key and certificate always belong together.
        let agent = try AgentProcess(config: path)
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 20) { (try? keychain.string(forKey: "certificate")) != nil }, agent.log)
        let first = try keychain.string(forKey: "serial_number")
        var missing = 0
        let end = Date().addingTimeInterval(9)
        while Date() < end {
            let values = Dictionary(uniqueKeysWithValues: try keychain.allValues().map { ($0.key.description, $0.value) })
            if values["certificate"] == nil || values["private_key"] == nil { missing += 1 }
            usleep(100_000)
        }
        XCTAssertEqual(missing, 0, "the certificate was missing while the agent ran: \(agent.log)")
        XCTAssertNotEqual(try keychain.string(forKey: "serial_number"), first, "a new certificate was issued: \(agent.log)")
        try assertKeyMatchesCertificate(keychain)
    }

    private func assertKeyMatchesCertificate(_ keychain: Keychain, file: StaticString = #filePath, line: UInt = #line) throws {
        let values = Dictionary(uniqueKeysWithValues: try keychain.allValues().map { ($0.key.description, $0.value) })
        let certificate = folder + "/cert.pem", key = folder + "/key.pem"
        FileManager.default.createFile(atPath: certificate, contents: Data(values["certificate"] ?? []))
        FileManager.default.createFile(atPath: key, contents: Data(values["private_key"] ?? []))
        defer { try? FileManager.default.removeItem(atPath: key) }
        let fromCertificate = try runCommand("/usr/bin/openssl", ["x509", "-in", certificate, "-noout", "-pubkey"])
        let fromKey = try runCommand("/usr/bin/openssl", ["pkey", "-in", key, "-pubout"])
        XCTAssertEqual(fromCertificate.status, 0, "\(fromCertificate)", file: file, line: line)
        XCTAssertEqual(fromCertificate.output, fromKey.output, "the key belongs to the certificate", file: file, line: line)
    }

    /// A token with a short TTL is renewed before it ends, and when the role's max TTL
    /// stops the renewals the agent logs in again; the token item's deadline follows.
    func testTheTokenIsRenewedAndALoginFollowsWhenRenewalEnds() throws {
        let lab = try lab()
        let role = "kc-short-\(getpid())-\(UUID().uuidString.prefix(6))"
        try lab.mustBao("write", "auth/approle/role/\(role)", "token_policies=kc-agent", "token_ttl=3s", "token_max_ttl=7s")
        let roleID = try lab.mustBao("read", "-field=role_id", "auth/approle/role/\(role)/role-id")
        let secretID = try lab.mustBao("write", "-f", "-field=secret_id", "auth/approle/role/\(role)/secret-id")
        let auth = uniqueService("auth")
        let keychain = try Keychain(service: auth).accessibility(.afterFirstUnlock)
        try keychain.set(roleID, forKey: "role_id")
        try keychain.set(secretID, forKey: "secret_id")
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=1")
        let service = uniqueService("renewed")
        let path = try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": service]], "poll_interval": "200ms"]))
        let agent = try AgentProcess(config: path)
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 30) { (try? self.value(service, "x")) == "1" }, agent.log)
        let firstToken = try XCTUnwrap(try value(auth, "token"))
        XCTAssertLessThanOrEqual(try XCTUnwrap(try keychain.deadline(forKey: "token")).secondsLeft, 3)
        // Past the max TTL (7 s): a second login, and the sync never stopped.
        XCTAssertTrue(waitUntil(seconds: 20) { agent.log.components(separatedBy: "logged in").count >= 3 }, agent.log)
        XCTAssertNotEqual(try value(auth, "token"), firstToken)
        try lab.mustBao("kv", "put", secret, "x=2")
        XCTAssertTrue(waitUntil(seconds: 10) { (try? self.value(service, "x")) == "2" }, agent.log)
        XCTAssertFalse(agent.log.contains("waiting"), agent.log)
    }

    /// A revoked secret id: the agent cannot log in again, says so in one line naming
    /// the item to fix, and the secrets it mirrored stay readable meanwhile.
    func testARevokedSecretIDIsNamedAndTheMirroredItemsStay() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=kept")
        let auth = try storeCredentials(lab, secretID: try lab.mustBao("write", "-f", "-field=secret_id", "auth/approle/role/kc-agent/secret-id"))
        let service = uniqueService("kept")
        let path = try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]]))
        XCTAssertEqual(try agent(["sync", path]).status, 0)
        // Revoke both: the secret id, and the token the agent holds.
        let secretID = try XCTUnwrap(try value(auth, "secret_id"))
        try lab.mustBao("write", "auth/approle/role/kc-agent/secret-id/destroy", "secret_id=\(secretID)")
        try lab.mustBao("token", "revoke", try XCTUnwrap(try value(auth, "token")))
        let refused = try agent(["sync", path])
        XCTAssertEqual(refused.status, 1, "\(refused)")
        XCTAssertTrue(refused.standardError.contains("AppRole login at auth/approle was refused"), refused.standardError)
        XCTAssertTrue(refused.standardError.contains("kc set \(auth) secret_id"), refused.standardError)
        XCTAssertEqual(refused.standardError.split(separator: "\n").filter { $0.contains("refused") }.count, 1, refused.standardError)
        XCTAssertEqual(try value(service, "x"), "kept", "what was mirrored stays")
        // A new secret id stored in kc: the next sync logs in.
        try Keychain(service: auth).accessibility(.afterFirstUnlock).set(
            try lab.mustBao("write", "-f", "-field=secret_id", "auth/approle/role/kc-agent/secret-id"), forKey: "secret_id")
        let recovered = try agent(["sync", path])
        XCTAssertEqual(recovered.status, 0, "\(recovered)")
    }

    /// What a user gets wrong in OpenBao: a key kc cannot hold, a value over the kernel's
    /// 32767 bytes, a path that is not KV v2, an address nothing listens on. One clear
    /// line each, and what kc already holds is unharmed.
    func testBadInputIsNamedAndNothingStoredIsHarmed() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "good=1")
        let service = uniqueService("guarded")
        let auth = try storeCredentials(lab)
        let path = try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]]))
        XCTAssertEqual(try agent(["sync", path]).status, 0)

        try lab.mustBao("kv", "put", secret, "good=2", "bad/key=x")
        var result = try agent(["sync", path])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("key 'bad/key': invalid item name"), result.standardError)
        XCTAssertTrue(result.standardError.contains("keeps what it held") || result.standardError.contains("keeps version"), result.standardError)
        XCTAssertEqual(try value(service, "good"), "1", "the refused version changed nothing")

        let big = String(repeating: "x", count: 32768)
        XCTAssertEqual(try lab.bao(["kv", "put", secret, "good=3", "big=-"], input: Array(big.utf8)).status, 0)
        result = try agent(["sync", path])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("key 'big': value too large: 32768 bytes"), result.standardError)
        XCTAssertEqual(try value(service, "good"), "1")
        XCTAssertEqual(try Keychain(service: service).allKeys(), ["good"])

        // A path in an engine that is not KV v2.
        let notKV = try writeConfig(config(lab, auth: auth, ["kv": [["secret": "pki/issue/web", "service": uniqueService("pki")]]]), name: "pki.json")
        result = try agent(["sync", notKV])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("'pki/issue/web' is not a KV version 2 secret: its mount 'pki/' is a 'pki' engine"), result.standardError)

        // A KV version 1 mount the token's policy does not grant: OpenBao's refusal, in
        // one line; with a token that may (root's, stored in kc: the "token" method), the
        // engine's version is named.
        let v1 = "kv1-\(getpid())-\(UUID().uuidString.prefix(6))"
        try lab.mustBao("secrets", "enable", "-path=\(v1)", "-version=1", "kv")
        let kv1 = try writeConfig(config(lab, auth: auth, ["kv": [["secret": "\(v1)/x", "service": uniqueService("kv1")]]]), name: "kv1.json")
        result = try agent(["sync", kv1])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("kv[0]: OpenBao refused sys/internal/ui/mounts/\(v1)/x (HTTP 403)"), result.standardError)
        XCTAssertFalse(result.standardError.contains("waiting"), result.standardError)
        let rootAuth = uniqueService("root")
        try Keychain(service: rootAuth).set(lab["BAO_TOKEN"], forKey: "token")
        var rootConfig = config(lab, auth: rootAuth, ["kv": [["secret": "\(v1)/x", "service": uniqueService("kv1")]]])
        rootConfig["auth"] = ["method": "token", "service": rootAuth]
        result = try agent(["sync", try writeConfig(rootConfig, name: "root.json")])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("'\(v1)/x' is not a KV version 2 secret: its mount '\(v1)/' is a KV version 1 engine"), result.standardError)

        // Nothing listening: the items stay, the agent says it cannot reach OpenBao.
        var port = 0
        let probe = socket(AF_INET, Int32(SOCK_STREAM.rawValue), 0)
        var address = sockaddr_in(sin_family: sa_family_t(AF_INET), sin_port: 0, sin_addr: in_addr(s_addr: inet_addr("127.0.0.1")), sin_zero: (0, 0, 0, 0, 0, 0, 0, 0))
        var length = socklen_t(MemoryLayout<sockaddr_in>.size)
        withUnsafeMutablePointer(to: &address) { pointer in
            pointer.withMemoryRebound(to: sockaddr.self, capacity: 1) { _ = bind(probe, $0, length); _ = getsockname(probe, $0, &length) }
        }
        port = Int(UInt16(bigEndian: address.sin_port))
        close(probe)
        var wrong = config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]])
        wrong["address"] = "http://127.0.0.1:\(port)"
        result = try agent(["sync", try writeConfig(wrong, name: "wrong.json")])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("waiting for OpenBao: OpenBao cannot be reached: http://127.0.0.1:\(port)"), result.standardError)
        XCTAssertEqual(try value(service, "good"), "1")
    }

    /// A secret the token's policy denies (403 "permission denied", as for a bad token)
    /// is named in one line; the token is kept, no new login is made each poll, and the
    /// secrets after it are mirrored. With a token the user stored (the token method),
    /// the agent never removes it. (Found by the hostile review of issue 38.)
    func testASecretThePolicyDeniesIsNamedAndNeitherCostsALoginNorTheToken() throws {
        let lab = try lab()
        let denied = uniqueSecret("denied"), allowed = uniqueSecret("allowed")
        let policy = "kc-deny-\(getpid())-\(UUID().uuidString.prefix(6))"
        let written = try lab.bao(["policy", "write", policy, "-"], input: Array("""
            path "secret/data/*" { capabilities = ["read"] }
            path "secret/metadata/*" { capabilities = ["read"] }
            path "\(denied.replacingOccurrences(of: "secret/", with: "secret/data/"))" { capabilities = ["deny"] }
            """.utf8))
        XCTAssertEqual(written.status, 0, "\(written)")
        let role = "kc-deny-\(getpid())-\(UUID().uuidString.prefix(6))"
        try lab.mustBao("write", "auth/approle/role/\(role)", "token_policies=\(policy)")
        try lab.mustBao("kv", "put", denied, "pw=x")
        try lab.mustBao("kv", "put", allowed, "user=alice")
        let auth = uniqueService("auth")
        let keychain = try Keychain(service: auth).accessibility(.afterFirstUnlock)
        try keychain.set(try lab.mustBao("read", "-field=role_id", "auth/approle/role/\(role)/role-id"), forKey: "role_id")
        try keychain.set(try lab.mustBao("write", "-f", "-field=secret_id", "auth/approle/role/\(role)/secret-id"), forKey: "secret_id")
        let deniedService = uniqueService("denied"), allowedService = uniqueService("allowed")
        let kv: [[String: Any]] = [["secret": denied, "service": deniedService], ["secret": allowed, "service": allowedService]]
        let agent = try AgentProcess(config: try writeConfig(config(lab, auth: auth, ["kv": kv, "poll_interval": "100ms"])))
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 30) { (try? self.value(allowedService, "user")) == "alice" }, agent.log)
        let token = try value(auth, "token")
        usleep(1_500_000)  // fifteen polls
        agent.stop()
        XCTAssertEqual(agent.log.components(separatedBy: "logged in").count, 2, "one login: \(agent.log)")
        XCTAssertEqual(agent.log.components(separatedBy: "kv[0]: OpenBao refused \(denied.replacingOccurrences(of: "secret/", with: "secret/metadata/"))").count
                       + agent.log.components(separatedBy: "kv[0]: OpenBao refused \(denied.replacingOccurrences(of: "secret/", with: "secret/data/"))").count, 3,
                       "named once: \(agent.log)")
        XCTAssertEqual(try value(auth, "token"), token)
        XCTAssertFalse(try Keychain(service: deniedService).serviceExists())

        // The token method: the user's token, refused for one secret, stays in kc.
        let userAuth = uniqueService("user-token")
        let userToken = try lab.mustBao("token", "create", "-policy=\(policy)", "-ttl=1h", "-field=token")
        try Keychain(service: userAuth).set(userToken, forKey: "token")
        var tokenConfig = config(lab, auth: userAuth, ["kv": kv])
        tokenConfig["auth"] = ["method": "token", "service": userAuth]
        let result = try self.agent(["sync", try writeConfig(tokenConfig, name: "token.json")])
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertEqual(try value(userAuth, "token"), userToken, "the user's token is theirs: \(result.standardError)")
        XCTAssertEqual(try value(allowedService, "user"), "alice")
    }

    /// The least-privilege policy most applications get, read on secret/data/* and
    /// nothing on secret/metadata/*: the agent polls the data itself, and mirrors.
    /// (Found by the hostile review of issue 38: it logged in again at every poll.)
    func testAPolicyThatReadsDataButNotMetadataStillMirrors() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        let policy = "kc-data-\(getpid())-\(UUID().uuidString.prefix(6))"
        let written = try lab.bao(["policy", "write", policy, "-"], input: Array("path \"secret/data/*\" { capabilities = [\"read\"] }\n".utf8))
        XCTAssertEqual(written.status, 0, "\(written)")
        let role = "kc-data-\(getpid())-\(UUID().uuidString.prefix(6))"
        try lab.mustBao("write", "auth/approle/role/\(role)", "token_policies=\(policy)")
        try lab.mustBao("kv", "put", secret, "x=1")
        let auth = uniqueService("auth")
        let keychain = try Keychain(service: auth).accessibility(.afterFirstUnlock)
        try keychain.set(try lab.mustBao("read", "-field=role_id", "auth/approle/role/\(role)/role-id"), forKey: "role_id")
        try keychain.set(try lab.mustBao("write", "-f", "-field=secret_id", "auth/approle/role/\(role)/secret-id"), forKey: "secret_id")
        let service = uniqueService("data-only")
        let agent = try AgentProcess(config: try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": service]], "poll_interval": "100ms"])))
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 30) { (try? self.value(service, "x")) == "1" }, agent.log)
        try lab.mustBao("kv", "put", secret, "x=2")
        XCTAssertTrue(waitUntil(seconds: 10) { (try? self.value(service, "x")) == "2" }, agent.log)
        try lab.mustBao("kv", "delete", secret)
        XCTAssertTrue(waitUntil(seconds: 10) { (try? Keychain(service: service).serviceExists()) == false }, agent.log)
        XCTAssertEqual(agent.log.components(separatedBy: "logged in").count, 2, "one login: \(agent.log)")
        XCTAssertTrue(agent.log.contains("polling secret/data/"), agent.log)
    }

    /// A configuration that names a service the user already keeps items in (or a
    /// mistyped secret that does not exist, beside such a service) never takes those
    /// items over: the agent says so and leaves them. (Found by the hostile review.)
    func testAServiceTheUserMadeIsNeverTakenOver() throws {
        let lab = try lab()
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "token=from-bao")
        let mine = uniqueService("mine")
        try Keychain(service: mine).set("my own", forKey: "token")
        try Keychain(service: mine).set("also mine", forKey: "other")
        let auth = try storeCredentials(lab)
        var result = try agent(["sync", try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": mine]]]))])
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertTrue(result.standardError.contains("service '\(mine)' exists and kc-agent did not make it: its items are not replaced"), result.standardError)
        XCTAssertEqual(try value(mine, "token"), "my own")
        XCTAssertEqual(try value(mine, "other"), "also mine")
        result = try agent(["sync", try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret + "-typo", "service": mine]]]), name: "typo.json")])
        XCTAssertTrue(result.standardError.contains("is left as it is (kc-agent did not make it)"), result.standardError)
        XCTAssertEqual(try value(mine, "token"), "my own")
        // Removed by the user, the service is the agent's to make.
        try Keychain(service: mine).removeAll()
        result = try agent(["sync", try writeConfig(config(lab, auth: auth, ["kv": [["secret": secret, "service": mine]]]), name: "again.json")])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try value(mine, "token"), "from-bao")
    }

    /// Sealed, OpenBao serves nothing: the items kc holds stay readable, the agent says
    /// what it waits for, and carries on once unsealed.
    func testASealedOpenBaoLeavesTheItemsReadableAndTheAgentSaysWhatItWaitsFor() throws {
        let lab = try OpenBaoLab("dev")
        defer { lab.stop() }
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=before")
        let service = uniqueService("sealed")
        let path = try writeConfig(config(lab, auth: try storeCredentials(lab), ["kv": [["secret": secret, "service": service]], "poll_interval": "100ms"]))
        let agent = try AgentProcess(config: path)
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 30) { (try? self.value(service, "x")) == "before" }, agent.log)
        try lab.run("seal")
        XCTAssertTrue(agent.waitForLog("waiting for OpenBao"), agent.log)
        XCTAssertTrue(agent.log.contains("sealed"), agent.log)
        XCTAssertTrue(agent.log.contains("the items kc holds stay readable until their deadlines"), agent.log)
        XCTAssertEqual(try value(service, "x"), "before")
        XCTAssertEqual(agent.log.components(separatedBy: "waiting for OpenBao").count, 2, "said once: \(agent.log)")
        try lab.run("unseal")
        try lab.mustBao("kv", "put", secret, "x=after")
        XCTAssertTrue(waitUntil(seconds: 20) { (try? self.value(service, "x")) == "after" }, agent.log)
        XCTAssertTrue(agent.log.contains("OpenBao answers again"), agent.log)
    }
}

final class LockedFlag: @unchecked Sendable {
    private let lock = NSLock()
    private var value = false
    func set() { lock.withLock { value = true } }
    var isSet: Bool { lock.withLock { value } }
}
