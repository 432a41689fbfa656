import Foundation
import KCTestSupport
import KernelKeychain
import Keyrings
import XCTest

/// git's own `git-credential-libsecret` (built from Debian's git package) as a user runs
/// it: `credential.helper` in a gitconfig, `git credential approve/fill/reject`. What git
/// stores is the kc item `PROTOCOL:HOST[:PORT][%2FPATH]` / USER.
final class GitCredentialLibsecretTests: KeyringTestCase {
    private var helper = ""
    private var home = ""
    nonisolated(unsafe) private static var homes = 0

    override func setUpWithError() throws {
        try super.setUpWithError()
        helper = try SecretServiceClients.gitCredentialLibsecret()
        Self.homes += 1
        home = SecretServiceClients.folder + "/git-home-\(Self.homes)"
        try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        try "[credential]\n\thelper = \(helper)\n".write(toFile: home + "/.gitconfig", atomically: true, encoding: .utf8)
        addTeardownBlock { [home] in try? FileManager.default.removeItem(atPath: home) }
    }

    /// A host no other test uses; its kc service (`https:HOST…`) is removed at tearDown.
    private func uniqueHost(_ label: String = #function) -> String {
        let service = uniqueService(label)
        return service.replacingOccurrences(of: ".", with: "-").lowercased() + ".example.com"
    }

    private func removeAtTearDown(_ service: String) {
        servicesToRemove.append(KeyName(service))
    }

    /// `git credential ACTION` with `lines` on standard input, as a user with only the
    /// libsecret helper configured, who is never prompted.
    private func git(_ bus: SessionBus, _ action: String, _ lines: [String]) throws -> CommandResult {
        try bus.client("/usr/bin/git", ["credential", action], input: Array((lines.joined(separator: "\n") + "\n\n").utf8),
                       extraEnvironment: ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0", "GIT_ASKPASS": "/bin/false",
                                          "SSH_ASKPASS": "/bin/false", "XDG_CONFIG_HOME": home + "/.config"])
    }

    func testApproveFillRejectKeepTheCredentialInKC() throws {
        let bus = try startSecretServiceBus()
        let host = uniqueHost()
        removeAtTearDown("https:" + host)

        let approved = try git(bus, "approve", ["protocol=https", "host=\(host)", "username=carol", "password=g1t-t0ken"])
        XCTAssertEqual(approved.status, 0, "\(approved)")
        let stored = try bus.kc("get", "https:" + host, "carol")
        XCTAssertEqual(stored.status, 0, "git's libsecret helper stores the kc item https:HOST / USER: \(stored)")
        XCTAssertEqual(stored.output, "g1t-t0ken")

        let filled = try git(bus, "fill", ["protocol=https", "host=\(host)"])
        XCTAssertEqual(filled.status, 0, "\(filled)")
        XCTAssertEqual(filled.output, "protocol=https\nhost=\(host)\nusername=carol\npassword=g1t-t0ken\n")

        let rejected = try git(bus, "reject", ["protocol=https", "host=\(host)", "username=carol", "password=g1t-t0ken"])
        XCTAssertEqual(rejected.status, 0, "\(rejected)")
        XCTAssertEqual(try bus.kc("get", "https:" + host, "carol").status, 1, "reject removes the kc item")
        let unfilled = try git(bus, "fill", ["protocol=https", "host=\(host)"])
        XCTAssertNotEqual(unfilled.status, 0, "nothing left to fill, and no prompt allowed: \(unfilled)")
        XCTAssertFalse(unfilled.output.contains("password="), unfilled.output)
    }

    func testAPortAndAPathNameTheServiceAsTheREADMESays() throws {
        let bus = try startSecretServiceBus()
        let host = uniqueHost()
        let service = "https:\(host):8443%2Forg%2Frepo.git"
        removeAtTearDown(service)
        let lines = ["protocol=https", "host=\(host):8443", "path=org/repo.git", "username=dave", "password=p0rt"]
        var result = try bus.client("/usr/bin/git", ["-c", "credential.useHttpPath=true", "credential", "approve"],
                                    input: Array((lines.joined(separator: "\n") + "\n\n").utf8),
                                    extraEnvironment: ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"])
        XCTAssertEqual(result.status, 0, "\(result)")
        result = try bus.kc("get", service, "dave")
        let services = try bus.kc("ls").output
        XCTAssertEqual(result.status, 0, "\(result); kc ls: \(services)")
        XCTAssertEqual(result.output, "p0rt")

        // Another path on the same host is another credential.
        let other = try bus.client("/usr/bin/git", ["-c", "credential.useHttpPath=true", "credential", "fill"],
                                   input: Array("protocol=https\nhost=\(host):8443\npath=org/other.git\n\n".utf8),
                                   extraEnvironment: ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"])
        XCTAssertFalse(other.output.contains("password=p0rt"), "\(other)")
        let same = try bus.client("/usr/bin/git", ["-c", "credential.useHttpPath=true", "credential", "fill"],
                                  input: Array("protocol=https\nhost=\(host):8443\npath=org/repo.git\n\n".utf8),
                                  extraEnvironment: ["HOME": home, "GIT_CONFIG_NOSYSTEM": "1", "GIT_TERMINAL_PROMPT": "0"])
        XCTAssertEqual(same.status, 0, "\(same)")
        XCTAssertTrue(same.output.contains("username=dave\npassword=p0rt\n"), same.output)
    }

    func testTwoUsersOfOneHostAreTwoItems() throws {
        let bus = try startSecretServiceBus()
        let host = uniqueHost()
        removeAtTearDown("https:" + host)
        XCTAssertEqual(try git(bus, "approve", ["protocol=https", "host=\(host)", "username=erin", "password=one"]).status, 0)
        XCTAssertEqual(try git(bus, "approve", ["protocol=https", "host=\(host)", "username=frank", "password=two"]).status, 0)
        XCTAssertEqual(try bus.kc("get", "https:" + host, "erin").output, "one")
        XCTAssertEqual(try bus.kc("get", "https:" + host, "frank").output, "two")
        let filled = try git(bus, "fill", ["protocol=https", "host=\(host)", "username=frank"])
        XCTAssertEqual(filled.output, "protocol=https\nhost=\(host)\nusername=frank\npassword=two\n", "\(filled)")
    }
}
