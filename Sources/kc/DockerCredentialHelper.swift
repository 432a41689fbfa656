import KernelKeychain
import Keyrings

#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// `docker-credential-kc store|get|erase|list|version`: the credential helper protocol
/// of docker and podman (github.com/docker/docker-credential-helpers), run when kc is
/// called by that name (`"credsStore": "kc"` or `"credHelpers": {"HOST": "kc"}`).
///
/// The keyring mapping: one service per server, `docker:SERVER` with the server URL
/// exactly as the client names it, escaped as ``CredentialName`` does (`/` as `%2F`,
/// `%` as `%25`): `docker:127.0.0.1:5000`, `docker:https:%2F%2Findex.docker.io%2Fv1%2F`.
/// It holds one item, named after the user (escaped the same way), whose value is the
/// secret: `kc get docker:127.0.0.1:5000 alice` prints alice's password. A store
/// replaces the server's credential, user included.
///
/// As the reference helpers do, every answer and every error goes to standard output
/// (the clients read errors there), and any failure exits 1. A missing credential is
/// exactly `credentials not found in native keychain`, which clients take to mean "pull
/// without logging in"; kc's own errors start with `kc: `.
enum DockerCredentialHelper {
    static let notFound = "credentials not found in native keychain"
    static let servicePrefix = Array("docker:".utf8)
    /// A secret of 32767 bytes is up to six times longer as JSON escapes.
    static let inputLimit = 262_144

    struct Failure: Error {
        var message: String
        init(_ message: String) { self.message = message }
        init(_ error: KeychainError) { self.message = "kc: \(error)" }
    }

    static func main() -> Never {
        let argv = CommandLine.unsafeArgv
        guard CommandLine.argc == 2, let word = argv[1] else {
            answerFailure("Usage: docker-credential-kc <store|get|erase|list|version>")
        }
        do throws(Failure) {
            if strcmp(word, "store") == 0 { try store() }
            else if strcmp(word, "get") == 0 { try get() }
            else if strcmp(word, "erase") == 0 { try erase() }
            else if strcmp(word, "list") == 0 { try list() }
            else if strcmp(word, "version") == 0 { answer("docker-credential-kc (kc) \(kcVersion)\n") }
            else { throw Failure("Unknown credential action `\(String(cString: word))`") }
        } catch {
            answerFailure(error.message)
        }
        exit(0)
    }

    // MARK: Actions

    /// Reads `{"ServerURL": ..., "Username": ..., "Secret": ...}` and stores it.
    static func store() throws(Failure) {
        var input = try readInput()
        defer { input.overwriteWithZeros() }
        var fields: [String: [UInt8]]
        do {
            fields = try StrictJSON.stringFields(of: input, named: ["ServerURL", "Username", "Secret"])
        } catch {
            throw Failure("kc: the credentials are not valid JSON (\(error.reason)); expected {\"ServerURL\": ..., \"Username\": ..., \"Secret\": ...}")
        }
        // Taken out of the dictionary, so zeroing it zeroes the only copy.
        var secret = fields.removeValue(forKey: "Secret") ?? []
        defer { secret.overwriteWithZeros() }
        guard let server = fields["ServerURL"], !server.isEmpty else { throw Failure("no credentials server URL") }
        guard !server.contains(0) else { throw Failure("kc: the server URL holds a NUL character") }
        guard let user = fields["Username"], !user.isEmpty else { throw Failure("no credentials username") }
        guard !secret.isEmpty else { throw Failure("kc: the secret is empty; a keyring item cannot be empty") }
        guard let service = serviceName(forServer: server) else {
            throw Failure("kc: the server URL is too long for a service name (at most 248 bytes once '/' and '%' are escaped)")
        }
        guard let item = CredentialName.item(user) else {
            throw Failure("kc: the user name is too long for an item name (at most 255 bytes once '/' and '%' are escaped)")
        }
        try reported { () throws(KeychainError) in
            let keychain = try Keychain(service: service)
            try keychain.set(secret, forKey: item)
            // One credential per server: a login as another user replaces the old one.
            for other in try keychain.allKeyNames() where other != item { try keychain.remove(other) }
        }
    }

    /// Reads a server URL; prints its `{"ServerURL", "Username", "Secret"}`.
    static func get() throws(Failure) {
        let server = try readServer()
        guard let service = serviceName(forServer: server) else { throw Failure(notFound) }
        var output: [UInt8] = []
        defer { output.overwriteWithZeros() }
        let found = try reported { () throws(KeychainError) -> (user: [UInt8], secret: [UInt8])? in
            let keychain = try Keychain(service: service)
            for item in try keychain.allKeyNames() {
                guard let user = CredentialName.decode(item.bytes), let secret = try keychain.data(forKey: item) else { continue }
                return (user, secret)
            }
            return nil
        }
        guard var found else { throw Failure(notFound) }
        defer { found.secret.overwriteWithZeros() }
        // Room for the longest escaping up front: a reallocation would leave a copy.
        output.reserveCapacity((found.secret.count + server.count + found.user.count) * 6 + 64)
        output += Array(#"{"ServerURL":"#.utf8)
        let complete = StrictJSON.appendString(server, to: &output)
            && { output += Array(#","Username":"#.utf8); return StrictJSON.appendString(found.user, to: &output) }()
            && { output += Array(#","Secret":"#.utf8); return StrictJSON.appendString(found.secret, to: &output) }()
        guard complete else {
            throw Failure("kc: the credential stored in '\(service)' is not UTF-8 text, which JSON cannot carry; log in again to replace it")
        }
        output += Array("}\n".utf8)
        guard writeSecretOutput(&output) else { exit(1) }
    }

    /// Reads a server URL and removes its credential.
    static func erase() throws(Failure) {
        let server = try readServer()
        guard let service = serviceName(forServer: server) else { throw Failure(notFound) }
        let erased = try reported { () throws(KeychainError) in
            let keychain = try Keychain(service: service)
            guard try !keychain.allKeyNames().isEmpty else { return false }
            try keychain.removeAll()
            return true
        }
        guard erased else { throw Failure(notFound) }
    }

    /// Prints `{"SERVER": "USER", ...}` for every stored credential.
    static func list() throws(Failure) {
        var output = Array("{".utf8)
        try reported { () throws(KeychainError) in
            for service in try Keychain.services() {
                let name = service.bytes
                guard name.starts(with: servicePrefix),
                      let server = CredentialName.decode(name.dropFirst(servicePrefix.count)),
                      serviceName(forServer: server) == service,
                      let item = try Keychain(service: service).allKeyNames().first,
                      let user = CredentialName.decode(item.bytes) else { continue }
                // A name that is not UTF-8 (made with kc set, not by a client) has no
                // JSON string; writing the rest of its entry would break the object.
                var entry: [UInt8] = output.count > 1 ? [UInt8(ascii: ",")] : []
                guard StrictJSON.appendString(server, to: &entry) else { continue }
                entry.append(UInt8(ascii: ":"))
                guard StrictJSON.appendString(user, to: &entry) else { continue }
                output += entry
            }
        }
        output += Array("}\n".utf8)
        output.withUnsafeBytes { _ = writeAll(fd: 1, $0) }
    }

    // MARK: Names and input

    /// `docker:` and the escaped server URL; nil if that is too long for a name.
    static func serviceName(forServer server: [UInt8]) -> KeyName? {
        let name = servicePrefix + CredentialName.encode(server)
        guard name.count <= 255, !name.contains(0) else { return nil }
        return KeyName(bytes: name)
    }

    private static func readInput() throws(Failure) -> [UInt8] {
        switch readHelperInput(limit: inputLimit, stopAtBlankLine: false) {
        case .bytes(let bytes): return bytes
        case .tooLong: throw Failure("kc: the input is over \(inputLimit) bytes; a credential is much shorter")
        case .unreadable: throw Failure("kc: cannot read standard input: \(String(cString: strerror(errno)))")
        }
    }

    /// The server URL on standard input, without surrounding white space (as the
    /// reference helpers trim it).
    private static func readServer() throws(Failure) -> [UInt8] {
        let input = try readInput()
        let isSpace = { (byte: UInt8) in byte == 0x20 || (0x09...0x0D).contains(byte) }
        guard let first = input.firstIndex(where: { !isSpace($0) }), let last = input.lastIndex(where: { !isSpace($0) }) else {
            throw Failure("no credentials server URL")
        }
        return Array(input[first...last])
    }

    private static func reported<R>(_ body: () throws(KeychainError) -> R) throws(Failure) -> R {
        do {
            return try body()
        } catch {
            throw Failure(error)
        }
    }

    /// Writes an answer to standard output.
    private static func answer(_ text: String) {
        var text = text
        text.withUTF8 { _ = writeAll(fd: 1, UnsafeRawBufferPointer($0)) }
    }

    /// Writes the error line to standard output, where clients read it, and exits 1.
    private static func answerFailure(_ message: String) -> Never {
        answer(message + "\n")
        exit(1)
    }
}
