import Foundation
import KCTestSupport
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The truth about locks: in every state, the `Locked` properties, `Unlock`, the
/// unlocked and locked lists of `SearchItems`, and `GetSecrets` agree on which items
/// can be read, through python SecretStorage and secret-tool. An item that cannot be
/// read is locked everywhere; `Unlock` answers for it with a prompt, and the prompt's
/// `Prompt` says why it stays locked and what opens it (kc-secretd never shows a
/// prompt), which secret-tool prints. The states: the vault unlocked; a level locked
/// (`kc lock --level after-first-unlock`: the vault holds the items, the kernel does
/// not); another login's items of the `session` collection; no vault.
final class LockStateTests: VaultTestCase {
    override func setUpWithError() throws {
        try super.setUpWithError()
        try SecretServiceClients.requirePython()
        try SecretServiceClients.requireSecretTool()
    }

    /// Stores `username` under `service` with secret-tool, in `collection`.
    private func store(_ username: String, in collection: String, on bus: SessionBus, service: String,
                       file: StaticString = #filePath, line: UInt = #line) throws {
        let stored = try bus.secretTool("store", "--collection=" + collection, "--label", username, "service", service, "username", username,
                                        input: "value of " + username)
        XCTAssertEqual(stored.status, 0, "\(stored)", file: file, line: line)
    }

    /// What every door says of each item (by its username under `sys.argv[1]`) and each
    /// collection, as one JSON object: SearchItems' list, the item's `Locked`,
    /// GetSecrets, GetSecret, Unlock and its prompt, and SecretStorage's `is_locked()`
    /// and `unlock()`.
    private static let report = """
        import json, secretstorage
        from jeepney.wrappers import DBusErrorResponse
        S, usernames, collections = sys.argv[1], json.loads(sys.argv[2]), json.loads(sys.argv[3])
        c = Client()
        s = c.open('dh')
        connection = secretstorage.dbus_init()

        def unlock(path):
            unlocked, prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', [path])
            answer = {'unlocked': path in unlocked, 'prompt': prompt != '/'}
            if prompt != '/':
                answer['prompted'] = c.attempt(prompt, PROMPT, 'Prompt', 's', '')
            return answer

        def secretstorage_unlock(thing):
            try:
                return 'dismissed' if thing.unlock() else 'unlocked'
            except DBusErrorResponse as error:
                return error.name

        report = {}
        for username in usernames:
            unlocked, locked = c.search({'service': S, 'username': username})
            if len(unlocked) + len(locked) != 1:
                report[username] = {'found': [unlocked, locked]}
                continue
            path = (unlocked + locked)[0]
            item = secretstorage.Item(connection, path)
            report[username] = {
                'listed': 'unlocked' if unlocked else 'locked',
                'Locked': c.get(path, ITEM, 'Locked'),
                'GetSecrets': path in c.secrets(s, [path]),
                'GetSecret': c.attempt(path, ITEM, 'GetSecret', 'o', s.object_path).get('error', 'ok'),
                'secretstorage.is_locked': item.is_locked(),
                'Unlock': unlock(path),
                'secretstorage.unlock': secretstorage_unlock(item),
            }
        for name in collections:
            path = ROOT + '/collection/' + name
            report['collection ' + name] = {
                'Locked': c.get(path, COLLECTION, 'Locked'),
                'secretstorage.is_locked': secretstorage.Collection(connection, path).is_locked(),
                'Unlock': unlock(path),
                'secretstorage.unlock': secretstorage_unlock(secretstorage.Collection(connection, path)),
            }
        emit(**report)
        """

    /// Checks that every door agrees that the items of `locked` (usernames under
    /// `service`) cannot be read and those of `unlocked` can, and that the collections
    /// of `lockedCollections` are locked and those of `unlockedCollections` are not;
    /// a locked item or collection's prompt, and secret-tool, say `kc unlock` opens it.
    private func assertEveryDoorAgrees(on bus: SessionBus, service: String, locked: [String], unlocked: [String],
                                       lockedCollections: [String] = [], unlockedCollections: [String],
                                       _ state: String, file: StaticString = #filePath, line: UInt = #line) throws {
        let collections = lockedCollections + unlockedCollections
        let out = try bus.python(Self.report, arguments: [service, jsonList(locked + unlocked), jsonList(collections)], file: file, line: line)
        for name in locked {
            let seen = out[name] ?? .null
            XCTAssertEqual(seen["listed"], "locked", "\(state): \(name) is in SearchItems' locked list: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["Locked"], true, "\(state): \(name)'s Locked: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["GetSecrets"], false, "\(state): GetSecrets leaves \(name) out: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["GetSecret"], "org.freedesktop.Secret.Error.IsLocked", "\(state): \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.is_locked"], true, "\(state): \(name): \(seen)", file: file, line: line)
            assertPromptSaysWhy(seen["Unlock"], "\(state): Unlock of \(name)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.unlock"], "org.freedesktop.Secret.Error.IsLocked", "\(state): \(name): \(seen)", file: file, line: line)
            let lookup = try bus.secretTool("lookup", "service", service, "username", name)
            XCTAssertEqual(lookup.status, 1, "\(state): secret-tool lookup of \(name): \(lookup)", file: file, line: line)
            XCTAssertEqual(lookup.output, "", file: file, line: line)
            XCTAssertTrue(lookup.standardError.hasPrefix("secret-tool: ") && lookup.standardError.contains("kc unlock"),
                          "\(state): secret-tool says why \(name) cannot be read: \(lookup)", file: file, line: line)
        }
        for name in unlocked {
            let seen = out[name] ?? .null
            XCTAssertEqual(seen["listed"], "unlocked", "\(state): \(name) is in SearchItems' unlocked list: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["Locked"], false, "\(state): \(name)'s Locked: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["GetSecrets"], true, "\(state): GetSecrets returns \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["GetSecret"], "ok", "\(state): \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.is_locked"], false, "\(state): \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["Unlock"], ["unlocked": true, "prompt": false], "\(state): Unlock of \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.unlock"], "unlocked", "\(state): \(name): \(seen)", file: file, line: line)
            let lookup = try bus.secretTool("lookup", "service", service, "username", name)
            XCTAssertEqual(lookup.status, 0, "\(state): secret-tool lookup of \(name): \(lookup)", file: file, line: line)
            XCTAssertEqual(lookup.output, "value of " + name, "\(state): \(lookup)", file: file, line: line)
        }
        for name in lockedCollections {
            let seen = out["collection " + name] ?? .null
            XCTAssertEqual(seen["Locked"], true, "\(state): the \(name) collection holds a locked item: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.is_locked"], true, "\(state): \(name): \(seen)", file: file, line: line)
            assertPromptSaysWhy(seen["Unlock"], "\(state): Unlock of the \(name) collection", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.unlock"], "org.freedesktop.Secret.Error.IsLocked", "\(state): \(name): \(seen)", file: file, line: line)
        }
        for name in unlockedCollections {
            let seen = out["collection " + name] ?? .null
            XCTAssertEqual(seen["Locked"], false, "\(state): the \(name) collection: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.is_locked"], false, "\(state): \(name): \(seen)", file: file, line: line)
            XCTAssertEqual(seen["Unlock"], ["unlocked": true, "prompt": false], "\(state): Unlock of the \(name) collection: \(seen)", file: file, line: line)
            XCTAssertEqual(seen["secretstorage.unlock"], "unlocked", "\(state): \(name): \(seen)", file: file, line: line)
        }
    }

    /// An Unlock that cannot open what it was asked to: a prompt, whose `Prompt` is
    /// refused with IsLocked and a message that names `kc unlock`.
    private func assertPromptSaysWhy(_ unlock: JSONValue?, _ what: String, file: StaticString, line: UInt) {
        XCTAssertEqual(unlock?["unlocked"], false, "\(what) stays locked: \(String(describing: unlock))", file: file, line: line)
        XCTAssertEqual(unlock?["prompt"], true, "\(what) answers with a prompt: \(String(describing: unlock))", file: file, line: line)
        XCTAssertEqual(unlock?["prompted"]?["error"], "org.freedesktop.Secret.Error.IsLocked", "\(what): \(String(describing: unlock))", file: file, line: line)
        XCTAssertTrue(unlock?["prompted"]?["message"]?.string?.contains("kc unlock") ?? false,
                      "\(what): the prompt says what opens it: \(String(describing: unlock))", file: file, line: line)
    }

    private func jsonList(_ names: [String]) -> String {
        "[" + names.map { "\"\($0)\"" }.joined(separator: ", ") + "]"
    }

    func testWithTheVaultUnlockedEveryItemIsUnlockedEverywhere() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        try store("in-login", in: "default", on: bus, service: service)
        try store("in-session", in: "session", on: bus, service: service)
        try assertEveryDoorAgrees(on: bus, service: service, locked: [], unlocked: ["in-login", "in-session"],
                                  unlockedCollections: ["login", "session"], "the vault unlocked")
    }

    /// `kc lock --level after-first-unlock` drops the `login` collection's items (and
    /// `when-unlocked`'s) from the kernel: the vault keeps them, no secret can be read,
    /// and every door says so until `kc unlock`.
    func testALockedLevelLocksItsItemsEverywhereUntilKCUnlock() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        try store("in-login", in: "default", on: bus, service: service)
        try store("in-session", in: "session", on: bus, service: service)
        let locked = try vault.lock(levels: ["after-first-unlock"])
        XCTAssertEqual(locked.status, 0, "\(locked)")
        try assertEveryDoorAgrees(on: bus, service: service, locked: ["in-login", "in-session"], unlocked: [],
                                  lockedCollections: ["login", "session"], unlockedCollections: [], "after kc lock --level after-first-unlock")

        let (unlocked, _) = try vault.unlock()
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        try assertEveryDoorAgrees(on: bus, service: service, locked: [], unlocked: ["in-login", "in-session"],
                                  unlockedCollections: ["login", "session"], "after kc unlock")
    }

    /// An item `kc set` stored (no record in the index) that a locked level took from the
    /// kernel is still the service's: listed locked, with kc's reason, not missing (it
    /// used to vanish from every search until `kc unlock`).
    func testAnItemKcSetStoredIsLockedNotMissingWhileItsLevelIsLocked() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        for name in ["by-kc-set", "in-kernel"] {
            let level = name == "by-kc-set" ? "after-first-unlock" : "always"
            XCTAssertEqual(try vault.set(service, name, "value of " + name, options: ["--access", level]).status, 0)
        }
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        try assertEveryDoorAgrees(on: bus, service: service, locked: ["by-kc-set"], unlocked: ["in-kernel"],
                                  lockedCollections: ["login"], unlockedCollections: [], "kc set's item, its level locked")
        XCTAssertEqual(try vault.unlock().result.status, 0)
        try assertEveryDoorAgrees(on: bus, service: service, locked: [], unlocked: ["by-kc-set", "in-kernel"],
                                  unlockedCollections: ["login"], "after kc unlock")
    }

    /// A second login (its own session keyring, with the user keyring linked as
    /// pam_keyinit links it) over the same vault: the first login's `session` items are
    /// not in its session keyring, so they are locked there, while its own `session`
    /// items and every `login` item can be read; `kc unlock` in that login loads them.
    func testAnotherLoginsSessionItemsAreLockedHereUntilKCUnlockInThisLogin() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let first = try startSecretServiceBus(vault: vault)
        try store("first-login-session", in: "session", on: first, service: service)
        try store("in-login", in: "default", on: first, service: service)
        first.stop()

        let keyring = "kc-test-other-login-\(getpid())"
        let wrapper = SecretServiceClients.folder + "/other-login-\(getpid())"
        try """
            #!/bin/sh
            exec /usr/bin/keyctl session '\(keyring)' /bin/sh -c 'keyctl link @u @s >/dev/null && exec "$0"' '\(builtSecretd)' 2>/dev/null
            """.write(toFile: wrapper, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: wrapper)
        addTeardownBlock { try? FileManager.default.removeItem(atPath: wrapper) }
        var environment = vault.environment
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        let second = try SessionBus(environment: environment, serviceExec: wrapper)
        addTeardownBlock { second.stop() }
        try store("second-login-session", in: "session", on: second, service: service)
        try assertEveryDoorAgrees(on: second, service: service, locked: ["first-login-session"], unlocked: ["second-login-session", "in-login"],
                                  lockedCollections: ["session"], unlockedCollections: ["login"], "in another login")

        let unlocked = try vault.bash("printf '%s\\n' \"$PASSPHRASE\" | keyctl session '\(keyring)' '\(builtKC)' unlock 2>&1")
        XCTAssertEqual(unlocked.status, 0, "\(unlocked)")
        try assertEveryDoorAgrees(on: second, service: service, locked: [], unlocked: ["first-login-session", "second-login-session", "in-login"],
                                  unlockedCollections: ["login", "session"], "after kc unlock in the other login")
    }

    /// A client that dismisses the prompt, or asks for it with no reply expected (so it
    /// could not hear the error), hears it was dismissed: `Completed` with nothing
    /// unlocked; the item stays locked.
    func testADismissedPromptOrOneAskedWithoutAReplyCompletesDismissed() throws {
        let vault = try makeVault()
        let service = uniqueService()
        let bus = try startSecretServiceBus(vault: vault)
        try store("in-login", in: "default", on: bus, service: service)
        XCTAssertEqual(try vault.lock(levels: ["after-first-unlock"]).status, 0)
        let out = try bus.python("""
            from jeepney.low_level import MessageFlag
            c = Client()
            item = c.search({'service': sys.argv[1], 'username': 'in-login'})[1][0]
            completions = {}
            for how in ('Dismiss', 'Prompt without a reply'):
                unlocked, prompt = c.call(ROOT, SERVICE, 'Unlock', 'ao', [item])
                with c.subscribe(interface=PROMPT, member='Completed', path=prompt) as signals:
                    if how == 'Dismiss':
                        c.call(prompt, PROMPT, 'Dismiss')
                    else:
                        message = new_method_call(DBusAddress(prompt, NAME, PROMPT), 'Prompt', 's', ('',))
                        message.header.flags = MessageFlag.no_reply_expected
                        c.conn.send(message)
                    dismissed, (signature, paths) = c.conn.recv_until_filtered(signals, timeout=10).body
                completions[how] = [unlocked, dismissed, paths]
            emit(completions=completions, locked=c.get(item, ITEM, 'Locked'))
            """, arguments: [service])
        XCTAssertEqual(out["completions"], ["Dismiss": [[], true, []], "Prompt without a reply": [[], true, []]], "\(out)")
        XCTAssertEqual(out["locked"], true)
    }

    func testWithoutAVaultEveryItemIsUnlockedEverywhere() throws {
        let service = uniqueService()
        let bus = try startSecretServiceBus()
        try store("in-login", in: "default", on: bus, service: service)
        try store("in-session", in: "session", on: bus, service: service)
        try assertEveryDoorAgrees(on: bus, service: service, locked: [], unlocked: ["in-login", "in-session"],
                                  unlockedCollections: ["login", "session"], "without a vault")
    }
}
