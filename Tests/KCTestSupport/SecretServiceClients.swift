import Foundation
import XCTest

#if canImport(Glibc)
import Glibc
#endif

/// The real Secret Service clients the conformance tests drive: `secret-tool`, python
/// (`jeepney`, the D-Bus library python SecretStorage is built on, with SecretStorage's DH
/// code), python `keyring`'s command, and git's `git-credential-libsecret` built from the
/// source in Debian's git package. Each `require…` skips the test, never fails it, where
/// the client is missing.
public enum SecretServiceClients {
    public static let python = "/usr/bin/python3"
    public static let secretTool = "/usr/bin/secret-tool"
    /// Every client call is cut off after this many seconds (`timeout`), so a call the
    /// daemon never answers fails its test instead of hanging the suite.
    public static let callLimit = 60

    public static func requireSecretTool() throws {
        guard FileManager.default.isExecutableFile(atPath: secretTool) else {
            throw XCTSkip("no \(secretTool) (Debian's libsecret-tools): the libsecret client to test with")
        }
    }

    /// Skips unless `/usr/bin/python3` imports `modules` (Debian: python3-secretstorage
    /// brings jeepney and cryptography).
    public static func requirePython(_ modules: [String] = ["jeepney", "secretstorage", "cryptography"]) throws {
        guard FileManager.default.isExecutableFile(atPath: python) else { throw XCTSkip("no \(python): the python clients need it") }
        let probe = try runCommand(python, ["-c", "import " + modules.joined(separator: ", ")])
        guard probe.status == 0 else {
            throw XCTSkip("\(python) cannot import \(modules.joined(separator: ", ")) (Debian: python3-secretstorage, python3-keyring): \(probe.standardError.split(separator: "\n").last ?? "")")
        }
    }

    /// python `keyring`'s command and its SecretService backend.
    public static func requireKeyringCommand() throws -> String {
        try requirePython(["keyring.backends.SecretService", "secretstorage"])
        let command = "/usr/bin/keyring"
        guard FileManager.default.isExecutableFile(atPath: command) else { throw XCTSkip("no \(command) (Debian's python3-keyring)") }
        return command
    }

    /// The environment that makes python `keyring` use the Secret Service, not kc's own
    /// backend (which `Tools/setup.sh` installs) or another.
    public static let keyringBackend = ["PYTHON_KEYRING_BACKEND": "keyring.backends.SecretService.Keyring"]

    /// A folder of this test process's (`/tmp/kc-test-secretservice-PID`, removed with the
    /// run's other folders), readable by the test users: the python client, the built
    /// git helper and the bus configurations of other users.
    public static var folder: String {
        let path = "/tmp/kc-test-secretservice-\(getpid())"
        if !FileManager.default.fileExists(atPath: path) {
            try? FileManager.default.createDirectory(atPath: path, withIntermediateDirectories: true, attributes: [.posixPermissions: 0o755])
        }
        return path
    }

    /// The folder holding `sstest.py` (written on first use), for `PYTHONPATH`.
    public static var pythonPath: String {
        let file = folder + "/sstest.py"
        if !FileManager.default.fileExists(atPath: file) {
            try? pythonClient.write(toFile: file, atomically: true, encoding: .utf8)
            try? FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        }
        return folder
    }

    nonisolated(unsafe) private static var builtGitHelper: Result<String, XCTSkip>?

    /// git's `git-credential-libsecret`, compiled once per test process from
    /// `/usr/share/doc/git/contrib/credential/libsecret` (needs gcc, pkg-config and
    /// libsecret-1-dev).
    public static func gitCredentialLibsecret() throws -> String {
        if let builtGitHelper { return try builtGitHelper.get() }
        let result = buildGitHelper()
        builtGitHelper = result
        return try result.get()
    }

    private static func buildGitHelper() -> Result<String, XCTSkip> {
        let source = "/usr/share/doc/git/contrib/credential/libsecret/git-credential-libsecret.c"
        guard FileManager.default.fileExists(atPath: source) else {
            return .failure(XCTSkip("no \(source) (Debian's git package ships it): git's libsecret helper cannot be built"))
        }
        guard programExists("gcc"), programExists("pkg-config"), programExists("git") else {
            return .failure(XCTSkip("git, gcc and pkg-config are needed to build and run git-credential-libsecret"))
        }
        let helper = folder + "/git-credential-libsecret"
        let built = try? runShell("gcc -O2 -o '\(helper)' '\(source)' $(pkg-config --cflags --libs libsecret-1 glib-2.0) 2>&1")
        guard built?.status == 0 else {
            return .failure(XCTSkip("git-credential-libsecret did not build (libsecret-1-dev missing?): \(built?.output ?? "")"))
        }
        return .success(helper)
    }

    /// A small Secret Service client for the tests (`from sstest import *`).
    static let pythonClient = #"""
        """A small Secret Service client for kc's conformance tests: jeepney (the D-Bus
        library python SecretStorage is built on) and SecretStorage's DH session code."""
        import json, os, sys
        from jeepney import DBusAddress, new_method_call, MessageType, HeaderFields, MatchRule
        from jeepney.io.blocking import open_dbus_connection
        from secretstorage.dhcrypto import Session, int_to_bytes
        from secretstorage.util import format_secret
        from cryptography.hazmat.primitives.ciphers import Cipher, algorithms, modes

        NAME = 'org.freedesktop.secrets'
        ROOT = '/org/freedesktop/secrets'
        DEFAULT = ROOT + '/aliases/default'
        SESSION_COLLECTION = ROOT + '/collection/session'
        SERVICE = 'org.freedesktop.Secret.Service'
        COLLECTION = 'org.freedesktop.Secret.Collection'
        ITEM = 'org.freedesktop.Secret.Item'
        PROMPT = 'org.freedesktop.Secret.Prompt'
        PROPERTIES = 'org.freedesktop.DBus.Properties'
        DH = 'dh-ietf1024-sha256-aes128-cbc-pkcs7'


        class BusError(Exception):
            def __init__(self, name, message):
                super().__init__('%s: %s' % (name, message))
                self.name = name
                self.message = message


        class Client:
            def __init__(self, timeout=20):
                self.conn = open_dbus_connection(bus='SESSION')
                self.timeout = timeout

            def call(self, path, interface, member, signature=None, *body, destination=NAME):
                message = new_method_call(DBusAddress(path, destination, interface), member, signature, body)
                reply = self.conn.send_and_get_reply(message, timeout=self.timeout)
                if reply.header.message_type == MessageType.error:
                    raise BusError(reply.header.fields.get(HeaderFields.error_name, '?'),
                                   reply.body[0] if reply.body else '')
                return reply.body

            def attempt(self, *arguments, **options):
                """The call's outcome: {'reply': body} or {'error': name, 'message': text}."""
                try:
                    return {'reply': self.call(*arguments, **options)}
                except BusError as error:
                    return {'error': error.name, 'message': error.message}

            def get(self, path, interface, name):
                (signature, value), = self.call(path, PROPERTIES, 'Get', 'ss', interface, name)
                return value

            def set(self, path, interface, name, signature, value):
                self.call(path, PROPERTIES, 'Set', 'ssv', interface, name, (signature, value))

            def open(self, algorithm='plain'):
                """A session: 'plain', or 'dh' (the key agreed as SecretStorage does)."""
                session = Session()
                if algorithm == 'plain':
                    output, path = self.call(ROOT, SERVICE, 'OpenSession', 'sv', 'plain', ('s', ''))
                    session.encrypted = False
                else:
                    output, path = self.call(ROOT, SERVICE, 'OpenSession', 'sv', DH, ('ay', int_to_bytes(session.my_public_key)))
                    assert output[0] == 'ay', output
                    session.set_server_public_key(int.from_bytes(output[1], 'big'))
                session.object_path = path
                return session

            def create(self, session, attributes, secret, label='', content_type='text/plain', replace=True,
                       collection=DEFAULT):
                properties = {ITEM + '.Label': ('s', label), ITEM + '.Attributes': ('a{ss}', attributes)}
                if isinstance(secret, str):
                    secret = secret.encode()
                item, prompt = self.call(collection, COLLECTION, 'CreateItem', 'a{sv}(oayays)b',
                                         properties, format_secret(session, secret, content_type), replace)
                assert prompt == '/', 'CreateItem asked for a prompt: %s' % prompt
                return item

            def secret(self, session, item):
                """(value, content type) of an item through GetSecret."""
                (path, parameters, value, content_type), = self.call(item, ITEM, 'GetSecret', 'o', session.object_path)
                return decrypt(session, parameters, value), content_type

            def secrets(self, session, items):
                """{item: value} through GetSecrets."""
                found, = self.call(ROOT, SERVICE, 'GetSecrets', 'aoo', items, session.object_path)
                return {item: decrypt(session, secret[1], secret[2]) for item, secret in found.items()}

            def search(self, attributes):
                """(unlocked, locked) through the service's SearchItems."""
                unlocked, locked = self.call(ROOT, SERVICE, 'SearchItems', 'a{ss}', attributes)
                return unlocked, locked

            def delete(self, item):
                prompt, = self.call(item, ITEM, 'Delete')
                return prompt

            def owner_pid(self):
                pid, = self.call('/org/freedesktop/DBus', 'org.freedesktop.DBus', 'GetConnectionUnixProcessID', 's', NAME,
                                 destination='org.freedesktop.DBus')
                return pid

            def subscribe(self, **rule):
                """A queue of the signals matching `rule` (jeepney MatchRule fields)."""
                match = MatchRule(type='signal', **rule)
                self.call('/org/freedesktop/DBus', 'org.freedesktop.DBus', 'AddMatch', 's', match.serialise(),
                          destination='org.freedesktop.DBus')
                return self.conn.filter(match, bufsize=1000)


        def decrypt(session, parameters, value):
            if not session.encrypted:
                return bytes(value)
            decryptor = Cipher(algorithms.AES(session.aes_key), modes.CBC(bytes(parameters))).decryptor()
            padded = decryptor.update(bytes(value)) + decryptor.finalize()
            return padded[:-padded[-1]]


        def text(value):
            """Bytes as text for the report (UTF-8, or 'hex:…' when they are not)."""
            try:
                return value.decode('utf-8')
            except UnicodeDecodeError:
                return 'hex:' + value.hex()


        def emit(**values):
            """The test's observations: one JSON line on standard output, read by the Swift test."""
            print(json.dumps(values, sort_keys=True))
        """#
}

extension SessionBus {
    /// Runs a client program on this bus, cut off after ``SecretServiceClients/callLimit``
    /// seconds (then exit 124).
    @discardableResult
    public func client(_ executable: String, _ arguments: [String], input: [UInt8] = [],
                       extraEnvironment: [String: String] = [:], timeLimit: Int = SecretServiceClients.callLimit) throws -> CommandResult {
        try run("/usr/bin/timeout", ["-k", "5", String(timeLimit), executable] + arguments,
                input: input, extraEnvironment: extraEnvironment)
    }

    /// `secret-tool ARGUMENTS` on this bus.
    @discardableResult
    public func secretTool(_ arguments: String..., input: String = "") throws -> CommandResult {
        try client(SecretServiceClients.secretTool, arguments, input: Array(input.utf8))
    }

    /// The built `kc` with the bus's environment (the daemon's vault, if any).
    @discardableResult
    public func kc(_ arguments: String..., input: [UInt8] = []) throws -> CommandResult {
        try run(builtKC, arguments, input: input)
    }

    /// Runs `script` with python3 after `from sstest import *` (``SecretServiceClients``'
    /// client) and returns what its last `emit(...)` printed. Fails the test (and returns
    /// an empty object) if python exits with an error. `timeLimit`: the seconds the whole
    /// script may take (a long run of many calls), ``SecretServiceClients/callLimit`` unless given.
    public func python(_ script: String, arguments: [String] = [], input: [UInt8] = [],
                       timeLimit: Int = SecretServiceClients.callLimit,
                       file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        let prelude = "import sys\nsys.path.insert(0, \(SecretServiceClients.pythonPath.debugDescription))\nfrom sstest import *\n"
        let result = try client(SecretServiceClients.python, ["-c", prelude + script] + arguments, input: input, timeLimit: timeLimit)
        guard result.status == 0 else {
            XCTFail("python client failed (exit \(result.status)\(result.status == 124 ? ": not done in \(timeLimit) s" : "")): \(result.standardError)", file: file, line: line)
            return .object([:])
        }
        guard let last = result.output.split(separator: "\n").last,
              let value = try? JSONDecoder().decode(JSONValue.self, from: Data(last.utf8)) else {
            XCTFail("python client printed no JSON: \(result)", file: file, line: line)
            return .object([:])
        }
        return value
    }

    /// The pid that owns `org.freedesktop.secrets` after a call has started it (an
    /// activating `Ping`), nil if nothing answers.
    public func activatedOwner() -> pid_t? {
        _ = try? run("/usr/bin/dbus-send", ["--session", "--print-reply", "--dest=org.freedesktop.secrets", "/org/freedesktop/secrets",
                                            "org.freedesktop.DBus.Peer.Ping"])
        return owner()
    }
}

/// The environment of a bus whose kc-secretd has no vault: `XDG_DATA_HOME` points where
/// none can be (a vault on the machine, say root's own, is never touched by a test).
public func environmentWithoutVault() -> [String: String] {
    var environment = ProcessInfo.processInfo.environment
    environment["XDG_DATA_HOME"] = VaultTestCase.noVaultDataHome
    environment["KC_HOST_KEY_DIR"] = nil
    for name in ["DBUS_SESSION_BUS_ADDRESS", "PYTHON_KEYRING_BACKEND", "GNOME_KEYRING_CONTROL"] { environment[name] = nil }
    return environment
}

extension KeyringTestCase {
    /// A session bus of this test's whose kc-secretd uses `vault` (else none), stopped at
    /// tearDown (kc-secretd leaves with it).
    public func startSecretServiceBus(vault: VaultFixture? = nil) throws -> SessionBus {
        var environment = vault?.environment ?? environmentWithoutVault()
        environment["DBUS_SESSION_BUS_ADDRESS"] = nil
        // Without a vault the index outlives the bus (a file of the boot's): each test has
        // a folder of its own for it, shared by its buses, so no test sees another's
        // collections or items.
        if vault == nil {
            let testName = name.utf8.reduce(UInt64(5381)) { ($0 &* 33) ^ UInt64($1) }
            let stateHome = "/tmp/kc-test-state-\(getpid())-\(String(testName, radix: 36))"
            if mkdir(stateHome, 0o700) == 0 {
                addTeardownBlock { _ = try? runCommand("/bin/rm", ["-rf", stateHome]) }
            }
            environment["XDG_STATE_HOME"] = stateHome
        }
        let bus = try SessionBus(environment: environment)
        addTeardownBlock { bus.stop() }
        return bus
    }
}

/// A JSON value as the python clients print it, comparable with literals in assertions:
/// `XCTAssertEqual(out["value"], "s3cret")`.
public enum JSONValue: Decodable, Equatable, CustomStringConvertible, ExpressibleByStringLiteral, ExpressibleByIntegerLiteral,
                       ExpressibleByBooleanLiteral, ExpressibleByArrayLiteral, ExpressibleByDictionaryLiteral, ExpressibleByNilLiteral {
    case string(String)
    case number(Double)
    case bool(Bool)
    case array([JSONValue])
    case object([String: JSONValue])
    case null

    public init(from decoder: Decoder) throws {
        let container = try decoder.singleValueContainer()
        if container.decodeNil() { self = .null }
        else if let value = try? container.decode(Bool.self) { self = .bool(value) }
        else if let value = try? container.decode(Double.self) { self = .number(value) }
        else if let value = try? container.decode(String.self) { self = .string(value) }
        else if let value = try? container.decode([JSONValue].self) { self = .array(value) }
        else { self = .object(try container.decode([String: JSONValue].self)) }
    }

    public init(stringLiteral value: String) { self = .string(value) }
    public init(integerLiteral value: Int) { self = .number(Double(value)) }
    public init(booleanLiteral value: Bool) { self = .bool(value) }
    public init(arrayLiteral elements: JSONValue...) { self = .array(elements) }
    public init(dictionaryLiteral elements: (String, JSONValue)...) { self = .object(Dictionary(elements) { $1 }) }
    public init(nilLiteral: ()) { self = .null }

    public subscript(key: String) -> JSONValue? {
        if case .object(let object) = self { return object[key] }
        return nil
    }

    public subscript(index: Int) -> JSONValue? {
        if case .array(let array) = self, array.indices.contains(index) { return array[index] }
        return nil
    }

    public var string: String? { if case .string(let value) = self { value } else { nil } }
    public var int: Int? { if case .number(let value) = self { Int(exactly: value) } else { nil } }
    public var array: [JSONValue] { if case .array(let value) = self { value } else { [] } }
    public var strings: [String] { array.compactMap(\.string) }
    public var object: [String: JSONValue] { if case .object(let value) = self { value } else { [:] } }

    public var description: String {
        switch self {
        case .string(let value): value.debugDescription
        case .number(let value): value == value.rounded() && abs(value) < 1e15 ? String(Int(value)) : String(value)
        case .bool(let value): String(value)
        case .array(let value): "[" + value.map(\.description).joined(separator: ", ") + "]"
        case .object(let value): "{" + value.sorted { $0.key < $1.key }.map { "\($0.key.debugDescription): \($0.value)" }.joined(separator: ", ") + "}"
        case .null: "null"
        }
    }
}

extension SecretServiceClients {
    /// Runs python `script` (after `from sstest import *`) as the unprivileged test user
    /// (``UnprivilegedUser``), in a fresh session keyring, on a session bus of that user's
    /// own (`dbus-run-session`) that starts a copy of kc-secretd the user may run, with no
    /// vault. Returns what the script's last `emit(...)` printed; fails the test if python
    /// fails. XCTSkip unless the suite runs as root.
    public static func pythonAsTestUser(_ script: String, file: StaticString = #filePath, line: UInt = #line) throws -> JSONValue {
        guard UnprivilegedUser.available else { throw XCTSkip("needs root, to run the daemon and its clients as the test user \(UnprivilegedUser.name)") }
        let (command, scriptFile) = try sessionBusCommand(running: script)
        defer { try? FileManager.default.removeItem(atPath: scriptFile) }
        // No vault, and no folder for the index the daemon would keep without one: it
        // keeps it in memory (the account has no home).
        let result = try UnprivilegedUser.run("""
            XDG_DATA_HOME=\(VaultTestCase.noVaultDataHome); XDG_STATE_HOME=\(VaultTestCase.noVaultDataHome); export XDG_DATA_HOME XDG_STATE_HOME
            unset DBUS_SESSION_BUS_ADDRESS PYTHON_KEYRING_BACKEND
            exec \(command)
            """)
        return emitted(by: result, as: UnprivilegedUser.name, file: file, line: line)
    }

    /// The shell command that runs python `script` (after `from sstest import *`) with
    /// `arguments` on a new session bus of the calling account's own (`dbus-run-session`),
    /// whose first call starts a copy of kc-secretd any account may run, and the script's
    /// file (readable by every account; the caller removes it). For a test that acts as
    /// another account (``TestAccount/run(_:input:freshSession:)``,
    /// ``VaultAccount/run(_:vault:input:)``): the daemon gets that shell's environment.
    public static func sessionBusCommand(running script: String, arguments: [String] = []) throws -> (command: String, scriptFile: String) {
        try SessionBus.requireDaemon()
        guard FileManager.default.isExecutableFile(atPath: "/usr/bin/dbus-run-session") else {
            throw XCTSkip("no /usr/bin/dbus-run-session (Debian's dbus-daemon package)")
        }
        let directory = folder + "/test-user-bus"
        let daemon = directory + "/kc-secretd"
        if !FileManager.default.fileExists(atPath: daemon) {
            try FileManager.default.createDirectory(atPath: directory + "/services", withIntermediateDirectories: true,
                                                    attributes: [.posixPermissions: 0o755])
            try FileManager.default.copyItem(atPath: builtSecretd, toPath: daemon)
            try FileManager.default.setAttributes([.posixPermissions: 0o755], ofItemAtPath: daemon)
            try """
                <!DOCTYPE busconfig PUBLIC "-//freedesktop//DTD D-Bus Bus Configuration 1.0//EN"
                 "http://www.freedesktop.org/standards/dbus/1.0/busconfig.dtd">
                <busconfig>
                  <type>session</type>
                  <listen>unix:tmpdir=/tmp</listen>
                  <auth>EXTERNAL</auth>
                  <servicedir>\(directory)/services</servicedir>
                  <policy context="default">
                    <allow send_destination="*" eavesdrop="true"/>
                    <allow eavesdrop="true"/>
                    <allow own="*"/>
                  </policy>
                </busconfig>
                """.write(toFile: directory + "/bus.conf", atomically: true, encoding: .utf8)
            try "[D-BUS Service]\nName=org.freedesktop.secrets\nExec=\(daemon)\n"
                .write(toFile: directory + "/services/org.freedesktop.secrets.service", atomically: true, encoding: .utf8)
        }
        let scriptFile = directory + "/script-\(UUID().uuidString).py"
        let prelude = "import sys\nsys.path.insert(0, \(pythonPath.debugDescription))\nfrom sstest import *\n"
        try (prelude + script).write(toFile: scriptFile, atomically: true, encoding: .utf8)
        try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: scriptFile)
        for file in [directory + "/bus.conf", directory + "/services/org.freedesktop.secrets.service"] {
            try FileManager.default.setAttributes([.posixPermissions: 0o644], ofItemAtPath: file)
        }
        let quoted = ([scriptFile] + arguments).map { "'" + $0.replacingOccurrences(of: "'", with: "'\\''") + "'" }.joined(separator: " ")
        return ("/usr/bin/timeout -k 5 \(callLimit * 2) /usr/bin/dbus-run-session --config-file=\(directory)/bus.conf -- \(python) \(quoted)", scriptFile)
    }

    /// What the last `emit(...)` of a python client run as `account` printed; fails the
    /// test (and returns an empty object) if python failed or printed none.
    public static func emitted(by result: CommandResult, as account: String, file: StaticString = #filePath, line: UInt = #line) -> JSONValue {
        guard result.status == 0 else {
            XCTFail("python client as \(account) failed (exit \(result.status)): \(result.standardError)", file: file, line: line)
            return .object([:])
        }
        guard let last = result.output.split(separator: "\n").last,
              let value = try? JSONDecoder().decode(JSONValue.self, from: Data(last.utf8)) else {
            XCTFail("python client as \(account) printed no JSON: \(result)", file: file, line: line)
            return .object([:])
        }
        return value
    }
}
