import Foundation
import KCTestSupport
import XCTest

/// A python project's own test suite, from its PyPI source release, run with pytest
/// against the Secret Service on a test's bus: the tests its authors run against
/// gnome-keyring, now against kc-secretd. The code under test is Debian's installed
/// package (python3-secretstorage, python3-keyring), which the venv sees through
/// `--system-site-packages`; only pytest and the test files come from PyPI. The venv and
/// the downloads are kept in the build folder (`upstream-clients/`), so only the first
/// run needs PyPI. Where pip cannot fetch, the test is skipped, with pip's reason.
struct UpstreamPythonSuite {
    /// Where the venv, the source releases and the runner live.
    static let home = builtFolder + "/upstream-clients"
    /// Debian 12's pytest, from PyPI.
    static let pytestRequirement = "pytest==7.2.1"
    static let pipTimeLimit = 300

    /// The folder holding the extracted test files (and a `pytest.ini` of ours, so that
    /// upstream's own settings, which add doctests of its package, are not read).
    let root: String

    /// The version of `distribution` Debian installed for `/usr/bin/python3`
    /// (SecretStorage 3.3.3, keyring 23.9.3 on Debian 12): the source release to test it with.
    static func installedVersion(of distribution: String) throws -> String {
        let probe = try runCommand(SecretServiceClients.python, ["-c", "import importlib.metadata as m, sys; print(m.version(sys.argv[1]))", distribution])
        guard probe.status == 0 else {
            throw XCTSkip("\(SecretServiceClients.python) has no \(distribution) (Debian: python3-secretstorage, python3-keyring)")
        }
        return probe.output.trimmingCharacters(in: .whitespacesAndNewlines)
    }

    /// Downloads the source release `name==version` (once) and extracts `members` (paths
    /// inside the release, without its top folder).
    init(_ name: String, version: String, members: [String]) throws {
        let venvPython = try Self.venvPython()
        let sdists = Self.home + "/sdists"
        let archive = try Self.sourceRelease(name, version: version, into: sdists, using: venvPython)
        let top = URL(fileURLWithPath: archive).lastPathComponent.replacingOccurrences(of: ".tar.gz", with: "")
        root = Self.home + "/" + top
        let ini = root + "/pytest.ini"
        if !FileManager.default.fileExists(atPath: ini) {
            let extracted = try runCommand("/bin/tar", ["-xzf", archive, "-C", Self.home] + members.map { top + "/" + $0 })
            guard extracted.status == 0 else { throw XCTSkip("\(archive) has not \(members): \(extracted.standardError)") }
            try "[pytest]\n".write(toFile: ini, atomically: true, encoding: .utf8)
        }
    }

    /// The venv's python, made once: `/usr/bin/python3 -m venv --system-site-packages`
    /// with pytest from PyPI.
    static func venvPython() throws -> String {
        let venv = home + "/venv"
        let python = venv + "/bin/python"
        let ready = venv + "/kc-ready"
        if FileManager.default.fileExists(atPath: ready) { return python }
        try? FileManager.default.removeItem(atPath: venv)
        do {
            try FileManager.default.createDirectory(atPath: home, withIntermediateDirectories: true)
        } catch {
            throw XCTSkip("cannot make \(home) for the venv (the build folder is another user's?): \(error.localizedDescription)")
        }
        let made = try runCommand(SecretServiceClients.python, ["-m", "venv", "--system-site-packages", venv])
        guard made.status == 0 else {
            throw XCTSkip("python3 -m venv failed (Debian: python3-venv): \(made.standardError.split(separator: "\n").last ?? "")")
        }
        try pip(python, ["install", "--quiet", pytestRequirement])
        try Data().write(to: URL(fileURLWithPath: ready))
        return python
    }

    /// `pip download --no-binary :all: --no-deps NAME==VERSION`, once; the archive's path.
    static func sourceRelease(_ name: String, version: String, into folder: String, using python: String) throws -> String {
        let existing = { () -> String? in
            let files = (try? FileManager.default.contentsOfDirectory(atPath: folder)) ?? []
            return files.first { $0.lowercased() == "\(name)-\(version).tar.gz".lowercased() }.map { folder + "/" + $0 }
        }
        if let archive = existing() { return archive }
        try pip(python, ["download", "--quiet", "--no-binary", ":all:", "--no-deps", "--dest", folder, "\(name)==\(version)"])
        guard let archive = existing() else { throw XCTSkip("pip downloaded no \(name)-\(version).tar.gz into \(folder)") }
        return archive
    }

    private static func pip(_ python: String, _ arguments: [String]) throws {
        let result = try runCommand("/usr/bin/timeout", [String(pipTimeLimit), python, "-m", "pip"] + arguments)
        guard result.status == 0 else {
            let reason = result.standardError.split(separator: "\n").last(where: { !$0.isEmpty }) ?? "exit \(result.status)"
            throw XCTSkip("pip \(arguments.first ?? "") could not fetch from PyPI (\(reason)): the upstream suite needs it once")
        }
    }

    /// Runs the test files `paths` (relative to ``root``) with pytest on `bus`, leaving
    /// out the tests named in `deselected` (node ids; the value says why).
    func run(_ paths: [String], deselecting deselected: [String: String] = [:], on bus: SessionBus,
             file: StaticString = #filePath, line: UInt = #line) throws -> PytestOutcome {
        let runner = Self.home + "/kc_pytest_outcomes.py"
        try Self.runnerScript.write(toFile: runner, atomically: true, encoding: .utf8)
        let arguments = [runner, "--rootdir", root, "-c", root + "/pytest.ini", "-p", "no:cacheprovider", "-q"]
            + deselected.keys.sorted().flatMap { ["--deselect", $0] } + paths.map { root + "/" + $0 }
        let result = try bus.client(try Self.venvPython(), arguments, timeLimit: 600)
        guard let last = result.output.split(separator: "\n").last,
              let json = try? JSONDecoder().decode(JSONValue.self, from: Data(last.utf8)),
              json["tests"] != nil else {
            XCTFail("pytest printed no outcomes (exit \(result.status)): \(result.output.suffix(3000)) \(result.standardError.suffix(2000))", file: file, line: line)
            return PytestOutcome(json: [:])
        }
        return PytestOutcome(json: json)
    }

    /// pytest with a plugin that records each test's outcome, printed as one JSON line last.
    static let runnerScript = #"""
        """Runs pytest on argv and prints one JSON line: each test's outcome, the deselected
        tests, and where the packages under test came from."""
        import importlib.metadata, json, sys
        import pytest


        class Outcomes:
            def __init__(self):
                self.tests = {}
                self.deselected = []

            def pytest_deselected(self, items):
                self.deselected += [item.nodeid for item in items]

            def pytest_runtest_logreport(self, report):
                entry = self.tests.setdefault(report.nodeid, {'outcome': 'passed', 'detail': ''})
                if report.failed:
                    entry['outcome'] = 'failed'
                    entry['detail'] += '%s: %s\n' % (report.when, report.longreprtext[-2000:])
                elif report.skipped and entry['outcome'] == 'passed':
                    entry['outcome'] = 'skipped'
                    entry['detail'] = report.longrepr[2] if isinstance(report.longrepr, tuple) else str(report.longrepr)


        outcomes = Outcomes()
        status = pytest.main(sys.argv[1:], plugins=[outcomes])
        packages = {}
        for name, module in (('SecretStorage', 'secretstorage'), ('keyring', 'keyring'), ('jeepney', 'jeepney'), ('pytest', 'pytest')):
            packages[name] = {'version': importlib.metadata.version(name), 'file': __import__(module).__file__}
        print(json.dumps({'status': int(status), 'tests': outcomes.tests, 'deselected': outcomes.deselected, 'packages': packages}))
        """#
}

/// What one pytest run did, test by test (node ids relative to the suite's root).
struct PytestOutcome {
    let json: JSONValue

    private func tests(_ outcome: String) -> [String: String] {
        json["tests"]?.object.filter { $0.value["outcome"]?.string == outcome }.mapValues { $0["detail"]?.string ?? "" } ?? [:]
    }

    var passed: Set<String> { Set(tests("passed").keys) }
    var failed: [String: String] { tests("failed") }
    var skipped: [String: String] { tests("skipped") }
    var deselected: Set<String> { Set(json["deselected"]?.strings ?? []) }
    /// Where python imported `distribution` from, and its version.
    func package(_ distribution: String) -> (version: String, file: String) {
        (json["packages"]?[distribution]?["version"]?.string ?? "", json["packages"]?[distribution]?["file"]?.string ?? "")
    }

    /// Fails the test once for each upstream test that failed, with pytest's report.
    func assertNoFailures(file: StaticString = #filePath, line: UInt = #line) {
        for (test, detail) in failed.sorted(by: { $0.key < $1.key }) {
            XCTFail("upstream test failed against kc-secretd: \(test)\n\(detail)", file: file, line: line)
        }
    }
}
