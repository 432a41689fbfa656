import FoundationEssentials
import KernelKeychain
#if canImport(Glibc)
import Glibc
#elseif canImport(Musl)
import Musl
#endif

/// What kc-agent syncs from where: the JSON file the agent is started with (README:
/// "kc as OpenBao's agent"). Every mistake is found before the agent starts, and named
/// by its place in the file.
public struct AgentConfiguration: Sendable {
    /// The cluster's nodes: the agent moves on to the next when one is down.
    public var addresses: [String]
    public var tls: TLSSettings
    public var auth: Auth
    /// How often each KV secret's current version is asked for.
    public var pollInterval: Duration
    public var kv: [KVMapping]
    public var leases: [LeaseMapping]

    public enum Auth: Sendable, Equatable {
        /// AppRole: `role_id` and `secret_id` are items of `service`; the token the login
        /// gives is kept there as `token`, with its TTL as the item's deadline.
        case appRole(mount: String, service: String, level: Accessibility)
        /// A token someone stored as `token` in `service` (no login, but renewal).
        case token(service: String, level: Accessibility)

        public var service: String {
            switch self { case .appRole(_, let service, _), .token(let service, _): service }
        }
        public var level: Accessibility {
            switch self { case .appRole(_, _, let level), .token(_, let level): level }
        }
    }

    /// A KV version 2 secret mirrored as a service: each key an item.
    public struct KVMapping: Sendable, Equatable {
        public var mount: String
        public var path: String
        public var service: String
        public var level: Accessibility
        public var secret: String { mount + "/" + path }
    }

    /// A secret with a lease (a PKI certificate and its key, database credentials):
    /// requested at `path` with `data`, each field of the answer an item of `service`,
    /// the lease's end their deadline.
    public struct LeaseMapping: Sendable, Equatable {
        public var path: String
        public var method: String
        public var data: JSONValue?
        public var service: String
        public var level: Accessibility
    }

    /// A mistake in the configuration, named by where it is.
    public struct Problem: Error, Sendable, CustomStringConvertible {
        public var place: String
        public var problem: String
        public var description: String { place.isEmpty ? problem : "\(place): \(problem)" }
    }

    public static func load(path: String) throws(Problem) -> AgentConfiguration {
        // Checked and read through one descriptor: a file swapped in after the check
        // is not the one read.
        let descriptor = open(path, O_RDONLY | O_CLOEXEC)
        guard descriptor >= 0 else {
            throw Problem(place: "", problem: "cannot read the configuration file '\(path)' (\(String(cString: strerror(errno)))); see 'man kc-agent' for its format")
        }
        defer { close(descriptor) }
        var info = stat()
        guard fstat(descriptor, &info) == 0 else {
            throw Problem(place: "", problem: "cannot read the configuration file '\(path)' (\(String(cString: strerror(errno))))")
        }
        try checkTrusted(info, path: path, place: "")
        try checkFolder(of: path, place: "")
        var contents: [UInt8] = []
        var buffer = [UInt8](repeating: 0, count: 65536)
        while true {
            let count = read(descriptor, &buffer, buffer.count)
            if count < 0 && errno == EINTR { continue }
            guard count >= 0 else {
                throw Problem(place: "", problem: "cannot read the configuration file '\(path)' (\(String(cString: strerror(errno))))")
            }
            if count == 0 { break }
            contents += buffer[..<count]
            if contents.count > 1 << 20 { throw Problem(place: "", problem: "'\(path)' is over 1 MiB: not a kc-agent configuration") }
        }
        return try parse(contents)
    }

    public static func parse(_ bytes: [UInt8]) throws(Problem) -> AgentConfiguration {
        guard let document = JSONValue.decode(bytes), let top = document.object else {
            throw Problem(place: "", problem: "the configuration is not a JSON object; see 'man kc-agent' for its format")
        }
        var reader = Reader(members: top, place: "")
        let addresses: [String]
        if let list = try reader.optionalArray("addresses") {
            addresses = try list.enumerated().map { (index, value) throws(Problem) in
                guard let text = value.string else { throw Problem(place: "addresses[\(index)]", problem: "must be a string such as \"https://bao.example:8200\"") }
                return text
            }
        } else if let one = try reader.optionalString("address") {
            addresses = [one]
        } else {
            throw Problem(place: "", problem: "no \"address\" (or \"addresses\"): name OpenBao's address, such as \"https://bao.example:8200\"")
        }
        if addresses.isEmpty { throw Problem(place: "addresses", problem: "is empty: name at least one address") }
        let plainHTTP = try reader.optionalBool("allow_plain_http") ?? false
        for (index, address) in addresses.enumerated() {
            let place = addresses.count == 1 && top["address"] != nil ? "address" : "addresses[\(index)]"
            try checkAddress(address, place: place, plainHTTP: plainHTTP)
        }
        let tls = TLSSettings(caFile: try reader.optionalFile("ca_file"),
                              clientCertificate: try reader.optionalFile("client_certificate"),
                              clientKey: try reader.optionalFile("client_key"))
        if (tls.clientCertificate == nil) != (tls.clientKey == nil) {
            throw Problem(place: tls.clientKey == nil ? "client_certificate" : "client_key", problem: "needs both \"client_certificate\" and \"client_key\"")
        }
        var interval = Duration.milliseconds(500)
        if let text = try reader.optionalString("poll_interval") {
            guard let parsed = parseInterval(text), parsed >= .milliseconds(50), parsed <= .seconds(3600) else {
                throw Problem(place: "poll_interval", problem: "'\(text)' is not an interval from 50ms to 1h, such as \"500ms\" or \"2s\"")
            }
            interval = parsed
        }
        guard let authMembers = try reader.optionalObject("auth") else {
            throw Problem(place: "", problem: "no \"auth\": use {\"method\": \"approle\", \"service\": \"openbao\"} with role_id and secret_id stored there (kc set openbao role_id)")
        }
        var authReader = Reader(members: authMembers, place: "auth")
        let method = try authReader.optionalString("method") ?? "approle"
        let authService = try authReader.serviceName("service", default: "openbao")
        let authLevel = try authReader.level("access")
        let auth: Auth
        switch method {
        case "approle":
            auth = .appRole(mount: try authReader.mountPath("mount", default: "approle"), service: authService, level: authLevel)
        case "token":
            auth = .token(service: authService, level: authLevel)
        default:
            throw Problem(place: "auth.method", problem: "'\(method)' is not a method kc-agent knows: use \"approle\" or \"token\"")
        }
        try authReader.rejectUnknown()

        var kv: [KVMapping] = []
        for (index, value) in (try reader.optionalArray("kv") ?? []).enumerated() {
            let place = "kv[\(index)]"
            guard let members = value.object else { throw Problem(place: place, problem: "must be an object such as {\"secret\": \"secret/app\", \"service\": \"com.app\"}") }
            var item = Reader(members: members, place: place)
            guard let secret = try item.optionalString("secret") else { throw Problem(place: place, problem: "no \"secret\": name the KV v2 secret, such as \"secret/app\"") }
            let (mount, path) = try splitSecret(secret, mount: try item.optionalString("mount"), place: place + ".secret")
            kv.append(KVMapping(mount: mount, path: path, service: try item.serviceName("service", default: nil), level: try item.level("access")))
            try item.rejectUnknown()
        }
        var leases: [LeaseMapping] = []
        for (index, value) in (try reader.optionalArray("leases") ?? []).enumerated() {
            let place = "leases[\(index)]"
            guard let members = value.object else { throw Problem(place: place, problem: "must be an object such as {\"path\": \"pki/issue/web\", \"data\": {\"common_name\": \"web.example\"}, \"service\": \"web.tls\"}") }
            var item = Reader(members: members, place: place)
            guard let path = try item.optionalString("path") else { throw Problem(place: place, problem: "no \"path\": name the API path that issues the secret, such as \"pki/issue/web\"") }
            try checkPath(path, place: place + ".path")
            let method = (try item.optionalString("method") ?? (members["data"] == nil ? "GET" : "POST")).uppercased()
            guard method == "GET" || method == "POST" || method == "PUT" else { throw Problem(place: place + ".method", problem: "'\(method)' is not GET, POST or PUT") }
            let data = members["data"]
            if let data, data.object == nil { throw Problem(place: place + ".data", problem: "must be a JSON object") }
            item.used.insert("data")
            leases.append(LeaseMapping(path: path, method: method, data: data, service: try item.serviceName("service", default: nil), level: try item.level("access")))
            try item.rejectUnknown()
        }
        if kv.isEmpty && leases.isEmpty { throw Problem(place: "", problem: "nothing to sync: add a \"kv\" or \"leases\" list") }
        var services: [String: String] = [auth.service: "auth"]
        for (index, mapping) in kv.enumerated() {
            if let other = services.updateValue("kv[\(index)]", forKey: mapping.service) {
                throw Problem(place: "kv[\(index)].service", problem: "'\(mapping.service)' is also \(other)'s service: each secret needs a service of its own (the agent replaces its items as a set)")
            }
        }
        for (index, mapping) in leases.enumerated() {
            if let other = services.updateValue("leases[\(index)]", forKey: mapping.service) {
                throw Problem(place: "leases[\(index)].service", problem: "'\(mapping.service)' is also \(other)'s service: each secret needs a service of its own (the agent replaces its items as a set)")
            }
        }
        try reader.rejectUnknown()
        return AgentConfiguration(addresses: addresses, tls: tls, auth: auth, pollInterval: interval, kv: kv, leases: leases)
    }

    /// A file that decides where the credentials go (the configuration names the
    /// server; the CA file decides whom to trust) must be the caller's or root's, and
    /// writable by no one else, as OpenSSH's StrictModes asks of its files: another user
    /// who could change it could send the AppRole's secret id to a server of theirs.
    static func checkTrusted(_ path: String, place: String) throws(Problem) {
        var info = stat()
        guard stat(path, &info) == 0 else {
            throw Problem(place: place, problem: "cannot read '\(path)' (\(String(cString: strerror(errno))))")
        }
        try checkTrusted(info, path: path, place: place)
        // libcurl opens the CA and certificate files again at each connection: the
        // folder must not let another user put a file of theirs in its place.
        try checkFolder(of: path, place: place)
    }

    /// The folder holding a trusted file: the caller's or root's, and writable by no one
    /// else unless sticky (as /tmp is: then no one else may rename or remove the file).
    static func checkFolder(of path: String, place: String) throws(Problem) {
        let folder: String
        if let slash = path.lastIndex(of: "/") { folder = slash == path.startIndex ? "/" : String(path[..<slash]) } else { folder = "." }
        var info = stat()
        guard stat(folder, &info) == 0 else { return }
        let owner = info.st_uid
        let othersMayWrite = info.st_mode & (S_IWGRP | S_IWOTH) != 0 && info.st_mode & S_ISVTX == 0
        if (owner != geteuid() && owner != 0) || othersMayWrite {
            throw Problem(place: place, problem: "'\(path)' is in '\(folder)', which \(othersMayWrite ? "its group or others may write" : "belongs to uid \(owner)"): another user could put a file of theirs in its place; keep it in a folder of your own")
        }
    }

    static func checkTrusted(_ info: stat, path: String, place: String) throws(Problem) {
        let owner = info.st_uid
        if owner != geteuid() && owner != 0 {
            throw Problem(place: place, problem: "'\(path)' belongs to uid \(owner), not to you or root: another user could point kc-agent at a server of theirs; use a file of your own")
        }
        if info.st_mode & (S_IWGRP | S_IWOTH) != 0 {
            throw Problem(place: place, problem: "'\(path)' is writable by its group or by others: anyone who can change it could point kc-agent at a server of theirs; chmod go-w '\(path)'")
        }
    }

    static func checkAddress(_ address: String, place: String, plainHTTP: Bool) throws(Problem) {
        if address.utf8.contains(where: { $0 <= 0x20 || $0 == 0x7f }) {
            throw Problem(place: place, problem: "'\(address.debugDescription.dropFirst().dropLast())' has a space or control character: not an address")
        }
        let lower = address.lowercased()
        if lower.hasPrefix("https://") {
            if address.count <= "https://".count { throw Problem(place: place, problem: "'\(address)' names no host") }
            return
        }
        if lower.hasPrefix("http://") {
            guard plainHTTP else {
                throw Problem(place: place, problem: "'\(address)' is plain HTTP: the token and every secret would cross the network unencrypted; use https:// with \"ca_file\", or set \"allow_plain_http\": true for a server on this machine")
            }
            return
        }
        throw Problem(place: place, problem: "'\(address)' is not an https:// address such as \"https://bao.example:8200\"")
    }

    static func checkPath(_ path: String, place: String) throws(Problem) {
        let parts = path.split(separator: "/", omittingEmptySubsequences: false)
        guard !path.isEmpty, !parts.contains(where: { $0.isEmpty || $0 == "." || $0 == ".." }),
              path.utf8.allSatisfy({ $0 > 0x20 && $0 < 0x7f && $0 != UInt8(ascii: "?") && $0 != UInt8(ascii: "#") && $0 != UInt8(ascii: "%") })
        else {
            throw Problem(place: place, problem: "'\(path)' is not an API path such as \"pki/issue/web\" (no empty, '.' or '..' parts, no spaces, '?', '#' or '%')")
        }
    }

    static func splitSecret(_ secret: String, mount: String?, place: String) throws(Problem) -> (String, String) {
        try checkPath(secret, place: place)
        if let mount {
            try checkPath(mount, place: place)
            guard secret.hasPrefix(mount + "/") else { throw Problem(place: place, problem: "'\(secret)' is not below its mount '\(mount)'") }
            return (mount, String(secret.dropFirst(mount.count + 1)))
        }
        guard let slash = secret.firstIndex(of: "/") else {
            throw Problem(place: place, problem: "'\(secret)' names no secret below a mount: write MOUNT/PATH, such as \"secret/app\"")
        }
        return (String(secret[..<slash]), String(secret[secret.index(after: slash)...]))
    }

    /// "500ms", "2s", "1m"; a bare number is seconds.
    static func parseInterval(_ text: String) -> Duration? {
        if text.hasSuffix("ms"), let value = Int(text.dropLast(2)), value > 0 { return .milliseconds(value) }
        if let value = Int(text), value > 0 { return .seconds(value) }
        return parseTimeout(text)
    }

    /// Reads members of one object, remembering which were used so that a misspelt one
    /// is named rather than ignored.
    struct Reader {
        var members: [JSONKey: JSONValue]
        var place: String
        var used = Swift.Set<String>()

        private func at(_ key: String) -> String { place.isEmpty ? key : place + "." + key }

        mutating func optionalString(_ key: String) throws(Problem) -> String? {
            used.insert(key)
            guard let value = members[key] else { return nil }
            guard let text = value.string, !text.isEmpty else { throw Problem(place: at(key), problem: "must be a non-empty string") }
            return text
        }

        mutating func optionalBool(_ key: String) throws(Problem) -> Bool? {
            used.insert(key)
            guard let value = members[key] else { return nil }
            guard let flag = value.bool else { throw Problem(place: at(key), problem: "must be true or false") }
            return flag
        }

        mutating func optionalArray(_ key: String) throws(Problem) -> [JSONValue]? {
            used.insert(key)
            guard let value = members[key] else { return nil }
            guard let list = value.array else { throw Problem(place: at(key), problem: "must be a list") }
            return list
        }

        mutating func optionalObject(_ key: String) throws(Problem) -> [JSONKey: JSONValue]? {
            used.insert(key)
            guard let value = members[key] else { return nil }
            guard let object = value.object else { throw Problem(place: at(key), problem: "must be an object") }
            return object
        }

        mutating func optionalFile(_ key: String) throws(Problem) -> String? {
            guard let path = try optionalString(key) else { return nil }
            guard access(path, R_OK) == 0 else {
                throw Problem(place: at(key), problem: "cannot read '\(path)' (\(String(cString: strerror(errno))))")
            }
            try AgentConfiguration.checkTrusted(path, place: at(key))
            return path
        }

        mutating func serviceName(_ key: String, default fallback: String?) throws(Problem) -> String {
            guard let name = try optionalString(key) ?? fallback else { throw Problem(place: place, problem: "no \"\(key)\": name the kc service its items go into") }
            do throws(KeychainError) {
                try validateName(KeyName(name), as: .service)
            } catch {
                throw Problem(place: at(key), problem: error.description)
            }
            return name
        }

        mutating func mountPath(_ key: String, default fallback: String) throws(Problem) -> String {
            let mount = try optionalString(key) ?? fallback
            try checkPath(mount, place: at(key))
            return mount
        }

        mutating func level(_ key: String) throws(Problem) -> Accessibility {
            guard let text = try optionalString(key) else { return .afterFirstUnlock }
            let device = text.hasSuffix("+this-device-only")
            let base = device ? String(text.dropLast("+this-device-only".count)) : text
            guard let level = Accessibility.Level(rawValue: base) else {
                throw Problem(place: at(key), problem: "'\(text)' is not a level: use when-unlocked, after-first-unlock or always (with +this-device-only if wanted)")
            }
            return Accessibility(level: level, thisDeviceOnly: device)
        }

        func rejectUnknown() throws(Problem) {
            if let unknown = members.keys.sorted().first(where: { !used.contains($0.text) })?.text {
                let known = used.sorted().map { "\"\($0)\"" }.joined(separator: ", ")
                throw Problem(place: at(unknown), problem: "is not a setting kc-agent knows here (it knows \(known))")
            }
        }
    }
}
