import Foundation
import KCTestSupport
import KernelKeychain
import XCTest

/// `kc export --format env` read back by the programs that read dotenv files: the real
/// python-dotenv, systemd's own environment-file parser, kc import, and docker compose's
/// documented env_file rules. Each must give back every value exactly.
final class DotEnvReadersTests: KeyringTestCase {
    /// Values that dotenv writers get wrong: `$`, quotes, backslashes, `#`, newlines.
    private let values: [(name: String, value: String)] = [
        ("PLAIN", "plain-token_123"),
        ("SPACES", " leading, inner  and\ttab, trailing "),
        ("DOLLARS", "$HOME $$ ${ not closed $"),
        ("HASH", "p#ss # not a comment"),
        ("EQUALS", "k=v=="),
        ("LINES", "line one\nline two\n"),
        ("WINDOWS_PATH", "C:\\path\\to\\x"),
        ("BACKSLASH_DOLLAR", "\\$ \\n stays"),
        ("QUOTE", "it's"),
        ("DOUBLE_QUOTES", "say \"hi\""),
        ("TWO_BACKSLASHES", "a\\\\b"),
        ("BACKSLASH_BEFORE_QUOTE", "a \\\"quoted\\\" word"),
        ("JSON", "{\"json\": \"it's\", \"n\": [1, 2]}"),
        ("UNICODE", "ünïcödé ☃ \u{0653}"),
        ("BACKTICK", "`date`"),
        ("NOT_A_VARIABLE", "${a:b} is not python-dotenv syntax"),
    ]

    /// The service filled with ``values``, exported as dotenv.
    private func exported() throws -> (service: String, text: String) {
        let service = uniqueService()
        let keychain = try Keychain(service: service)
        for (name, value) in values { try keychain.set(value, forKey: name) }
        let result = try kc("export", "--format", "env", "--service", service)
        XCTAssertEqual(result.status, 0, "\(result)")
        return (service, result.output)
    }

    private func temporaryFile(_ text: String) throws -> String {
        let path = NSTemporaryDirectory() + "kc-test-dotenv-\(getpid())-\(UUID().uuidString).env"
        try text.write(toFile: path, atomically: true, encoding: .utf8)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: path) }
        return path
    }

    func testPythonDotenvReadsEveryValueBack() throws {
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3"),
              try runCommand("/usr/bin/python3", ["-c", "import dotenv"]).status == 0 else {
            throw XCTSkip("Debian's python3-dotenv is not installed (Tools/install-deps.sh --tests installs it)")
        }
        let (_, text) = try exported()
        let path = try temporaryFile(text)
        // dotenv_values with its defaults: interpolation on, as applications call it.
        let script = "import json, sys, dotenv; print(json.dumps(dotenv.dotenv_values(sys.argv[1])))"
        let result = try runCommand("/usr/bin/python3", ["-c", script, path])
        XCTAssertEqual(result.status, 0, "\(result)")
        let read = try JSONSerialization.jsonObject(with: Data(result.standardOutput)) as? [String: String]
        XCTAssertEqual(read?.count, values.count, "\(text)")
        for (name, value) in values {
            XCTAssertEqual(read?[name], value, "python-dotenv read \(name) differently from:\n\(text)")
        }
    }

    func testKCImportReadsEveryValueBack() throws {
        let (_, text) = try exported()
        let copy = uniqueService()
        let result = try kc(["import", "--format", "env", "--service", copy], input: Array(text.utf8))
        XCTAssertEqual(result.status, 0, "\(result)")
        for (name, value) in values {
            XCTAssertEqual(try Keychain(service: copy).string(forKey: name), value, name)
        }
    }

    /// systemd's parser (the one behind `EnvironmentFile=`), run by the environment.d
    /// generator, which expands `$NAME` afterwards as `EnvironmentFile=` does not: so the
    /// values with `$` are left out here.
    func testSystemdReadsEveryValueBack() throws {
        let generator = "/usr/lib/systemd/user-environment-generators/30-systemd-environment-d-generator"
        guard FileManager.default.isExecutableFile(atPath: generator) else {
            throw XCTSkip("systemd's environment.d generator is not installed, so systemd's env-file parser cannot be run")
        }
        let (_, text) = try exported()
        let config = NSTemporaryDirectory() + "kc-test-systemd-env-\(getpid())"
        try FileManager.default.createDirectory(atPath: config + "/environment.d", withIntermediateDirectories: true)
        defer { try? FileManager.default.removeItem(atPath: config) }
        let prefixed = text.replacingOccurrences(of: "\n(?=[A-Z_]+=)", with: "\nKC_T_", options: .regularExpression)
        try ("KC_T_" + prefixed).write(toFile: config + "/environment.d/50-kc.conf", atomically: true, encoding: .utf8)
        let result = try runCommand(generator, [], environment: ["XDG_CONFIG_HOME": config, "HOME": config, "PATH": "/usr/bin:/bin"])
        XCTAssertEqual(result.status, 0, "\(result)")
        var read: [String: String] = [:]
        for line in result.output.split(separator: "\n") where line.hasPrefix("KC_T_") {
            let equals = line.firstIndex(of: "=")!
            read[String(line[line.index(line.startIndex, offsetBy: 5)..<equals])] = try shellUnquoted(String(line[line.index(after: equals)...]))
        }
        for (name, value) in values where !value.contains("$") {
            XCTAssertEqual(read[name], value, "systemd read \(name) differently from:\n\(text)")
        }
    }

    /// Undoes the generator's own quoting of what it prints (systemd's shell_maybe_quote:
    /// double quotes, `\` before `"` `\` `` ` `` `$`, C escapes for control characters).
    private func shellUnquoted(_ text: String) throws -> String {
        guard text.hasPrefix("\""), text.hasSuffix("\""), text.count >= 2 else { return text }
        var result = "", escaped = false
        for scalar in text.unicodeScalars.dropFirst().dropLast() {
            if escaped {
                switch scalar {
                case "n": result += "\n"
                case "t": result += "\t"
                case "\"", "\\", "`", "$": result.unicodeScalars.append(scalar)
                default: throw XCTSkip("the generator printed an escape this test does not know: \\\(scalar)")
                }
                escaped = false
            } else if scalar == "\\" {
                escaped = true
            } else {
                result.unicodeScalars.append(scalar)
            }
        }
        return result
    }

    /// docker compose v2 (compose-go) is a Go program Debian 12 does not ship, so its
    /// documented env_file rules are checked instead
    /// (docs.docker.com/compose/how-tos/environment-variables/variable-interpolation,
    /// ".env file syntax"): single-quoted values are literal but for `\'`; double-quoted
    /// values expand `$` and decode `\\`, `\"`, `\n`, `\r`, `\t`; both may span lines.
    func testComposeRulesReadEveryValueBack() throws {
        let (_, text) = try exported()
        let entries = try DotEnv.parse(text)
        XCTAssertEqual(entries.count, values.count)
        for (name, value) in values {
            let whole = "\n" + text
            let start = try XCTUnwrap(whole.range(of: "\n\(name)="), name)
            let rest = whole[start.upperBound...]
            let quote = try XCTUnwrap(rest.first, name)
            XCTAssertTrue(quote == "'" || quote == "\"", "\(name) is not quoted: \(text)")
            var read = "", escaped = false, closed = false
            for scalar in rest.unicodeScalars.dropFirst() {
                if escaped {
                    switch (quote, scalar) {
                    case ("'", "'"): read += "'"
                    case ("'", _): read += "\\"; read.unicodeScalars.append(scalar)
                    case (_, "n"): read += "\n"
                    case (_, "r"): read += "\r"
                    case (_, "t"): read += "\t"
                    case (_, "\\"), (_, "\""): read.unicodeScalars.append(scalar)
                    default: XCTFail("\(name): compose would not read the escape \\\(scalar)")
                    }
                    escaped = false
                } else if scalar == "\\" {
                    escaped = true
                } else if String(scalar) == String(quote) {
                    closed = true
                    break
                } else {
                    XCTAssertFalse(quote == "\"" && scalar == "$", "\(name): compose would expand $ in \(text)")
                    read.unicodeScalars.append(scalar)
                }
            }
            XCTAssertTrue(closed, name)
            XCTAssertEqual(read, value, "compose's rules read \(name) differently from:\n\(text)")
        }
    }

    /// A value no quoting carries to every reader: a clear error naming it, no output,
    /// and every item still as it was.
    func testAValueNoReaderKeepsIsRefusedByName() throws {
        for (value, reason) in [("x${HOME}", "python-dotenv expands"), ("it's $5", "compose expands"), ("a\r\nb", "carriage return"), ("C:\\", "ends with a backslash")] {
            let service = uniqueService()
            let keychain = try Keychain(service: service)
            try keychain.set("fine", forKey: "A")
            try keychain.set(value, forKey: "B")
            let result = try kc("export", "--format", "env", "--service", service)
            XCTAssertEqual(result.status, 2, "\(result)")
            XCTAssertEqual(result.standardOutput, [])
            XCTAssertTrue(result.standardError.hasPrefix("kc: cannot export as dotenv: B: "), result.standardError)
            XCTAssertTrue(result.standardError.contains(reason), result.standardError)
            XCTAssertTrue(result.standardError.hasSuffix("; export this service as JSON\n"), result.standardError)
            XCTAssertEqual(try keychain.string(forKey: "A"), "fine")
            XCTAssertEqual(try keychain.string(forKey: "B"), value)
            XCTAssertEqual(try kc("export", "--service", service).status, 0)
        }
    }
}
