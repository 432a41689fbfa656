import Foundation
import KCTestSupport
import XCTest

/// The password-command recipes of docs/INTEGRATIONS.md, run with the real tools: each
/// asks `kc get -q SERVICE ITEM` for its passphrase, and fails when the item is missing.
/// Every tool's HOME, cache and configuration are in a temporary folder, removed after.
final class PasswordCommandTests: KeyringTestCase {
    private var folder = ""

    override func setUpWithError() throws {
        try super.setUpWithError()
        folder = "/tmp/kc-test-pwcmd-\(name.filter { $0.isLetter || $0.isNumber }.suffix(40))-\(getpid())"
        try? FileManager.default.removeItem(atPath: folder)
        for sub in ["home", "cache", "config", "data", "files"] {
            try FileManager.default.createDirectory(atPath: "\(folder)/\(sub)", withIntermediateDirectories: true)
        }
        try "what the backup keeps\n".write(toFile: folder + "/files/notes.txt", atomically: true, encoding: .utf8)
    }

    override func tearDownWithError() throws {
        // restic and borg make read-only files.
        try? runShell("chmod -R u+w '\(folder)' 2>/dev/null; rm -rf '\(folder)'")
        try super.tearDownWithError()
    }

    /// The built kc first on PATH; HOME and the XDG folders inside the test's folder.
    private var environment: [String: String] {
        [
            "PATH": URL(fileURLWithPath: builtKC).deletingLastPathComponent().path + ":/usr/bin:/bin",
            "HOME": folder + "/home", "XDG_CACHE_HOME": folder + "/cache", "XDG_CONFIG_HOME": folder + "/config",
            "XDG_DATA_HOME": folder + "/data", "LANG": "C.UTF-8",
        ]
    }

    private func run(_ program: String, _ arguments: [String], _ extra: [String: String] = [:]) throws -> CommandResult {
        try runCommand("/usr/bin/env", [program] + arguments, environment: environment.merging(extra) { $1 })
    }

    func testBorgTakesItsPassphraseFromKc() throws {
        guard programExists("borg") else { throw XCTSkip("borg is missing (Tools/install-deps.sh --tests installs borgbackup)") }
        let service = uniqueService()
        try kc("set", service, "borg", input: Array("correct horse battery staple".utf8))
        let borg = ["BORG_PASSCOMMAND": "kc get -q \(service) borg", "BORG_DISPLAY_PASSPHRASE": "no"]
        let repository = folder + "/repo"
        let initialized = try run("borg", ["init", "--encryption=repokey", repository], borg)
        XCTAssertEqual(initialized.status, 0, "\(initialized)")
        let created = try run("borg", ["create", repository + "::first", folder + "/files"], borg)
        XCTAssertEqual(created.status, 0, "\(created)")
        let listed = try run("borg", ["list", "--short", repository], borg)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(listed.output, "first\n")

        try kc("set", service, "borg", input: Array("wrong".utf8))
        let wrong = try run("borg", ["list", "--short", repository], borg)
        XCTAssertNotEqual(wrong.status, 0, "the passphrase from kc is the one that counts: \(wrong)")

        try kc("rm", service, "borg")
        let missing = try run("borg", ["list", "--short", repository], borg)
        XCTAssertNotEqual(missing.status, 0, "\(missing)")
        XCTAssertTrue(missing.standardError.contains("BORG_PASSCOMMAND"), "borg says which command failed: \(missing)")
        XCTAssertFalse(missing.standardError.contains("kc: "), "kc get -q says nothing: \(missing)")
    }

    func testResticTakesItsPasswordFromKc() throws {
        guard programExists("restic") else { throw XCTSkip("restic is missing (Tools/install-deps.sh --tests installs it)") }
        let service = uniqueService()
        try kc("set", service, "restic", input: Array("restic pass\n".utf8))
        let repository = folder + "/repo"
        let options = ["--repo", repository, "--password-command", "kc get -q \(service) restic"]
        let initialized = try run("restic", ["init"] + options)
        XCTAssertEqual(initialized.status, 0, "\(initialized)")
        let backup = try run("restic", ["backup", "--quiet"] + options + [folder + "/files"])
        XCTAssertEqual(backup.status, 0, "\(backup)")
        let snapshots = try run("restic", ["snapshots", "--json"] + options)
        XCTAssertEqual(snapshots.status, 0, "\(snapshots)")
        let list = try XCTUnwrap(JSONSerialization.jsonObject(with: Data(snapshots.standardOutput)) as? [[String: Any]], "\(snapshots)")
        XCTAssertEqual(list.count, 1)
        XCTAssertEqual(list.first?["paths"] as? [String], [folder + "/files"])

        try kc("rm", service, "restic")
        let missing = try run("restic", ["snapshots"] + options)
        XCTAssertNotEqual(missing.status, 0, "\(missing)")
        XCTAssertFalse(missing.standardError.contains("kc: "), "kc get -q says nothing: \(missing)")
    }

    /// rclone 1.60 sets a configuration password only through `rclone config`'s menu,
    /// so a pseudo-terminal types it once; after that kc supplies it.
    func testRcloneDecryptsItsConfigurationWithAPasswordFromKc() throws {
        guard programExists("rclone") else { throw XCTSkip("rclone is missing") }
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/python3") else { throw XCTSkip("python3 drives rclone config's menu") }
        let service = uniqueService()
        let password = "rclone config pass"
        try kc("set", service, "rclone", input: Array(password.utf8))
        let rclone = ["RCLONE_CONFIG": folder + "/config/rclone.conf"]
        let created = try run("rclone", ["config", "create", "backups", "alias", "remote", folder + "/files"], rclone)
        XCTAssertEqual(created.status, 0, "\(created)")
        let menu = [("s/q>", "s"), ("a/q>", "a"), ("password:", password), ("password:", password), ("q>", "q"), ("s/q>", "q")]
        let encrypted = try PseudoTerminal.run("/usr/bin/env", ["rclone", "config"], answers: menu,
                                               environment: environment.merging(rclone) { $1 })
        XCTAssertEqual(encrypted.status, 0, "\(encrypted)")
        let configuration = try String(contentsOfFile: folder + "/config/rclone.conf", encoding: .utf8)
        XCTAssertTrue(configuration.contains("RCLONE_ENCRYPT_V0:"), configuration)

        let listed = try run("rclone", ["lsf", "backups:", "--password-command", "kc get -q \(service) rclone"], rclone)
        XCTAssertEqual(listed.status, 0, "\(listed)")
        XCTAssertEqual(listed.output, "notes.txt\n")
        try kc("rm", service, "rclone")
        let missing = try run("rclone", ["lsf", "backups:", "--password-command", "kc get -q \(service) rclone"], rclone)
        XCTAssertNotEqual(missing.status, 0, "\(missing)")
        XCTAssertTrue(missing.standardError.contains("password command failed"), "\(missing)")
    }

    /// Puts the repository's `use kc` (Integrations/direnv/use_kc.sh) where direnv
    /// reads its rc in this test's XDG_CONFIG_HOME.
    private func installUseKc() throws {
        let source = URL(fileURLWithPath: #filePath).deletingLastPathComponent().deletingLastPathComponent()
            .deletingLastPathComponent().appendingPathComponent("Integrations/direnv/use_kc.sh").path
        try FileManager.default.createDirectory(atPath: folder + "/config/direnv", withIntermediateDirectories: true)
        try FileManager.default.copyItem(atPath: source, toPath: folder + "/config/direnv/direnvrc")
    }

    /// `use kc SERVICE` exports what someone else may have named: an item `path` or
    /// `ld.preload` in a shared or imported service, or one named `PATH=token`, must not
    /// set PATH or LD_PRELOAD in the user's shell.
    func testDirenvUseKcRefusesItemsThatWouldSetDangerousVariables() throws {
        guard programExists("direnv") else { throw XCTSkip("direnv is missing") }
        try installUseKc()
        let project = folder + "/files/project"
        try FileManager.default.createDirectory(atPath: project, withIntermediateDirectories: true)
        for (name, value) in [("path", "/evil/bin"), ("ld.preload", "/evil/lib.so"), ("PATH=token", "x"), ("1st", "one")] {
            let service = uniqueService()
            try kc("set", service, "token", input: Array("/evil/bin".utf8))
            try kc("set", service, name, input: Array(value.utf8))
            try "use kc \(service)\n".write(toFile: project + "/.envrc", atomically: true, encoding: .utf8)
            XCTAssertEqual(try run("direnv", ["allow", project]).status, 0)
            let loaded = try run("direnv", ["exec", project, "sh", "-c", "printf '%s|%s|%s' \"$PATH\" \"${LD_PRELOAD-}\" \"${_1ST-}\""])
            XCTAssertFalse(loaded.output.contains("/evil/"), "item \(name): \(loaded)")
            if name == "PATH=token" {
                XCTAssertEqual(loaded.status, 0, "the item is named PATH=token, it does not name PATH: \(loaded)")
            } else if name == "1st" {
                XCTAssertTrue(loaded.output.hasSuffix("||one"), "a leading digit gets '_', as kc exec --env names it: \(loaded)")
            } else {
                XCTAssertTrue(loaded.standardError.contains("kc: item '\(name)' of '\(service)' would become $"), "\(loaded)")
            }
        }
    }

    func testDirenvUseKcExportsItems() throws {
        guard programExists("direnv") else { throw XCTSkip("direnv is missing") }
        try installUseKc()
        let service = uniqueService()
        try kc("set", service, "db.password", input: Array("pg secret".utf8))
        try kc("set", service, "token", input: Array("tok".utf8))
        let project = folder + "/files/project"
        try FileManager.default.createDirectory(atPath: project, withIntermediateDirectories: true)

        try "use kc \(service)\n".write(toFile: project + "/.envrc", atomically: true, encoding: .utf8)
        XCTAssertEqual(try run("direnv", ["allow", project]).status, 0)
        let every = try run("direnv", ["exec", project, "sh", "-c", "printf '%s|%s' \"$DB_PASSWORD\" \"$TOKEN\""])
        XCTAssertEqual(every.status, 0, "\(every)")
        XCTAssertEqual(every.output, "pg secret|tok")

        try "use kc \(service) GH_TOKEN=token\n".write(toFile: project + "/.envrc", atomically: true, encoding: .utf8)
        XCTAssertEqual(try run("direnv", ["allow", project]).status, 0)
        let named = try run("direnv", ["exec", project, "sh", "-c", "printf '%s|%s' \"$GH_TOKEN\" \"${DB_PASSWORD-unset}\""])
        XCTAssertEqual(named.output, "tok|unset", "\(named)")

        try "use kc \(service) missing\n".write(toFile: project + "/.envrc", atomically: true, encoding: .utf8)
        XCTAssertEqual(try run("direnv", ["allow", project]).status, 0)
        let missing = try run("direnv", ["exec", project, "true"])
        XCTAssertTrue(missing.standardError.contains("use kc: no item 'missing' in service '\(service)'"), "\(missing)")
    }
}
