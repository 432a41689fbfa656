import KernelKeychain
import KeyringCore
import Keyrings

/// The credential helper protocol of docker and podman
/// (github.com/docker/docker-credential-helpers) and how kc keeps their credentials;
/// `docker-credential-kc store|get|erase|list|version` (in kc) reads the command line
/// and standard input, calls these, and writes the answer.
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
/// exactly ``notFound``, which clients take to mean "pull without logging in"; kc's own
/// errors start with `kc: `.
public enum DockerCredentialHelper {
    /// The error text clients take to mean "no credential for this server".
    public static let notFound = "credentials not found in native keychain"
    static let servicePrefix = Array(staticBytes(DockerCredentialNames.servicePrefix))
    /// The most input a helper reads: a secret of 32767 bytes is up to six times longer
    /// as JSON escapes.
    public static let inputLimit = 262_144

    /// Why the helper cannot do what the client asked: `message` is the whole line the
    /// client is given (without its line feed), and never holds a secret.
    public struct Failure: Error {
        public var message: String
        /// A failure the client is told as `message`.
        public init(_ message: String) { self.message = message }
        init(_ error: KeychainError) { self.message = "kc: \(error)" }
    }

    // MARK: Actions

    /// `store`: reads `{"ServerURL": ..., "Username": ..., "Secret": ...}` and stores it,
    /// replacing the server's credential. The caller zeroes `input`.
    public static func store(_ input: [UInt8]) throws(Failure) {
        var fields: [String: [UInt8]]
        do {
            fields = try StrictJSON.stringFields(of: input, named: ["ServerURL", "Username", "Secret"])
        } catch {
            throw Failure("kc: the credentials are not valid JSON (\(error.reason)); expected {\"ServerURL\": ..., \"Username\": ..., \"Secret\": ...}")
        }
        // Taken out of the dictionary, so zeroing it zeroes the only copy.
        var secret = fields.removeValue(forKey: "Secret") ?? []
        defer { secret.overwriteWithZeros() }
        let server = try serverURL(in: fields["ServerURL"] ?? [])
        guard !server.contains(0) else { throw Failure("kc: the server URL holds a NUL character") }
        guard let user = fields["Username"], !user.isEmpty else { throw Failure("no credentials username") }
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

    /// `get`: reads a server URL; the answer is its
    /// `{"ServerURL":...,"Username":...,"Secret":...}` and a line feed, which the caller
    /// writes to standard output and zeroes.
    public static func get(_ input: [UInt8]) throws(Failure) -> [UInt8] {
        let server = try serverURL(in: input)
        guard let service = serviceName(forServer: server) else { throw Failure(notFound) }
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
        var output: [UInt8] = []
        // Room for the longest escaping up front: a reallocation would leave a copy.
        output.reserveCapacity((found.secret.count + server.count + found.user.count) * 6 + 64)
        output += Array(#"{"ServerURL":"#.utf8)
        let complete = StrictJSON.appendString(server, to: &output)
            && { output += Array(#","Username":"#.utf8); return StrictJSON.appendString(found.user, to: &output) }()
            && { output += Array(#","Secret":"#.utf8); return StrictJSON.appendString(found.secret, to: &output) }()
        guard complete else {
            output.overwriteWithZeros()
            throw Failure("kc: the credential stored in '\(service)' is not UTF-8 text, which JSON cannot carry; log in again to replace it")
        }
        output += Array("}\n".utf8)
        return output
    }

    /// `erase`: reads a server URL and removes its credential.
    public static func erase(_ input: [UInt8]) throws(Failure) {
        let server = try serverURL(in: input)
        guard let service = serviceName(forServer: server) else { throw Failure(notFound) }
        let erased = try reported { () throws(KeychainError) in
            let keychain = try Keychain(service: service)
            guard try !keychain.allKeyNames().isEmpty else { return false }
            try keychain.removeAll()
            return true
        }
        guard erased else { throw Failure(notFound) }
    }

    /// `list`: the answer `{"SERVER":"USER",...}` and a line feed, for every stored
    /// credential whose names are UTF-8.
    public static func list() throws(Failure) -> [UInt8] {
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
        return output
    }

    // MARK: Names and input

    /// `docker:` and the escaped server URL; nil if that is too long for a name.
    static func serviceName(forServer server: [UInt8]) -> KeyName? {
        DockerCredentialNames.service(server: server).map { KeyName(bytes: $0) }
    }

    /// The server URL a client sent, without surrounding white space: the reference
    /// helpers trim it on `get` and `erase` (the whole input) but not in `store`'s JSON,
    /// which made ` host ` stored and `host` asked two servers; kc trims it for all three.
    static func serverURL(in input: [UInt8]) throws(Failure) -> [UInt8] {
        guard let range = input.withUnsafeBytes({ DockerCredentialNames.serverRange(in: $0) }) else {
            throw Failure("no credentials server URL")
        }
        return Array(input[range])
    }

    private static func reported<R>(_ body: () throws(KeychainError) -> R) throws(Failure) -> R {
        do {
            return try body()
        } catch {
            throw Failure(error)
        }
    }
}
