import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// kc-agent against OpenBao as production runs it (issue 38): TLS verified against the
/// cluster's own CA (and a client certificate where the listener demands one), plain
/// HTTP only when the configuration says so, and a three-node Raft cluster on loopback
/// whose leader is killed while the agent mirrors from it.
final class OpenBaoClusterTests: OpenBaoTestCase {
    func testTLSIsVerifiedAgainstTheCAFileAndPlainHTTPMustBeAskedFor() throws {
        let lab = try OpenBaoLab("dev", ["--tls"])
        defer { lab.stop() }
        XCTAssertTrue(lab.address.hasPrefix("https://127.0.0.1:"), lab.address)
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=over-tls")
        let auth = try storeCredentials(lab)
        let service = uniqueService("tls")
        let good = config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]])
        let synced = try agent(["sync", try writeConfig(good)])
        XCTAssertEqual(synced.status, 0, "\(synced)")
        XCTAssertEqual(try value(service, "x"), "over-tls")

        // Another CA signed nothing the server shows: refused before any secret moves.
        let other = uniqueService("other")
        var wrongCA = config(lab, auth: auth, ["kv": [["secret": secret, "service": other]]])
        wrongCA["ca_file"] = lab.folder + "/other-ca.pem"
        var result = try agent(["sync", try writeConfig(wrongCA, name: "other.json")])
        XCTAssertEqual(result.status, 1)
        XCTAssertTrue(result.standardError.contains("OpenBao cannot be reached: \(lab.address): SSL certificate problem"), result.standardError)
        XCTAssertFalse(try Keychain(service: other).serviceExists())
        // No CA file: the system's CAs, which do not know the lab's.
        var systemCAs = wrongCA
        systemCAs["ca_file"] = nil
        result = try agent(["sync", try writeConfig(systemCAs, name: "system.json")])
        XCTAssertTrue(result.standardError.contains("SSL certificate problem"), result.standardError)

        // Plain HTTP is refused unless the configuration allows it, before anything runs.
        var plain = good
        plain["address"] = lab.address.replacingOccurrences(of: "https://", with: "http://")
        result = try agent(["sync", try writeConfig(plain, name: "plain.json")])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.standardError.contains("address: '\(plain["address"]!)' is plain HTTP: the token and every secret would cross the network unencrypted"), result.standardError)
        XCTAssertEqual(result.standardError.split(separator: "\n").count, 1, result.standardError)
    }

    func testAClientCertificateIsPresentedWhereTheListenerDemandsOne() throws {
        let lab = try OpenBaoLab("dev", ["--require-client-cert"])
        defer { lab.stop() }
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=mtls")
        let auth = try storeCredentials(lab)
        let service = uniqueService("mtls")
        let without = config(lab, auth: auth, ["kv": [["secret": secret, "service": service]]])
        var result = try agent(["sync", try writeConfig(without, name: "without.json")])
        XCTAssertEqual(result.status, 1, "\(result)")
        XCTAssertTrue(result.standardError.contains("OpenBao cannot be reached"), result.standardError)
        XCTAssertFalse(try Keychain(service: service).serviceExists())

        var with = without
        with["client_certificate"] = lab["BAO_CLIENT_CERT"]
        with["client_key"] = lab["BAO_CLIENT_KEY"]
        result = try agent(["sync", try writeConfig(with, name: "with.json")])
        XCTAssertEqual(result.status, 0, "\(result)")
        XCTAssertEqual(try value(service, "x"), "mtls")

        var half = with
        half["client_key"] = nil
        result = try agent(["sync", try writeConfig(half, name: "half.json")])
        XCTAssertEqual(result.status, 78)
        XCTAssertTrue(result.standardError.contains("client_certificate: needs both \"client_certificate\" and \"client_key\""), result.standardError)
    }

    /// Three Raft nodes, every one a voter, TLS on. The agent knows all three; the leader
    /// is killed with SIGKILL while the agent runs: the items stay readable throughout,
    /// and a value written through the new leader reaches kc.
    func testTheAgentCarriesOnWhenTheLeaderIsKilled() throws {
        let lab = try OpenBaoLab("cluster", ["--tls"])
        defer { lab.stop() }
        let secret = uniqueSecret()
        try lab.mustBao("kv", "put", secret, "x=1", "y=1")
        let service = uniqueService("cluster")
        var json = config(lab, auth: try storeCredentials(lab), ["kv": [["secret": secret, "service": service]], "poll_interval": "100ms"])
        json["address"] = nil
        json["addresses"] = [lab["NODE1_ADDR"], lab["NODE2_ADDR"], lab["NODE3_ADDR"]]
        let agent = try AgentProcess(config: try writeConfig(json))
        defer { agent.stop() }
        XCTAssertTrue(waitUntil(seconds: 30) { (try? self.value(service, "x")) == "1" }, agent.log)
        try lab.mustBao("kv", "put", secret, "x=2", "y=2")
        XCTAssertTrue(waitUntil(seconds: 10) { (try? self.value(service, "x")) == "2" }, agent.log)

        let killed = try lab.run("kill-leader")
        let newLeader = try XCTUnwrap(killed["LEADER_ADDR"])
        XCTAssertNotEqual(newLeader, killed["KILLED_ADDR"])
        let keychain = try Keychain(service: service)
        XCTAssertEqual(try keychain.allValues().count, 2, "nothing lost with the leader")
        let written = try lab.bao(["kv", "put", secret, "x=3", "y=3"], address: newLeader)
        XCTAssertEqual(written.status, 0, "\(written)")
        let start = Date()
        var lost = 0
        let reached = waitUntil(seconds: 20) {
            if ((try? keychain.allValues().count) ?? 0) != 2 { lost += 1 }
            return (try? self.value(service, "x")) == "3"
        }
        XCTAssertTrue(reached, agent.log)
        XCTAssertEqual(lost, 0, "the items stayed readable through the election")
        XCTAssertEqual(try value(service, "y"), "3")
        print("kc-agent: a write through the new leader reached kc \(Int(Date().timeIntervalSince(start) * 1000)) ms after it returned; election took \(killed["ELECTION_MS"] ?? "?") ms")
        XCTAssertTrue(agent.process.isRunning, agent.log)
    }
}
